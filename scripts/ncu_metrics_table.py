"""Side-by-side table of the metrics in several ncu text reports (one launch each):
  python3 scripts/ncu_metrics_table.py a.txt b.txt ...
Rows are metric names (stall ratios shortened), columns the reports (file stem) plus the kernel."""
import os
import re
import sys

LINE = re.compile(r"^\s{4}([a-z][\w.]+)\s+(\S+)?\s+([\d,.]+|n/a)\s*$")


def parse(path):
    vals, kernel = {}, "?"
    for line in open(path, errors="replace"):
        if re.match(r"^  \S", line) and "(" in line and "Context" in line:
            kernel = line.strip().split("(")[0][:60]
        m = LINE.match(line.rstrip("\n"))
        if m:
            name, unit, v = m.group(1), m.group(2) or "", m.group(3)
            name = name.replace("smsp__average_warps_issue_stalled_", "stall_").replace("_per_issue_active.ratio", "")
            vals[name] = (v, unit)
    return kernel, vals


reports = [(os.path.splitext(os.path.basename(p))[0], *parse(p)) for p in sys.argv[1:]]
names = []
for _, _, vals in reports:
    names += [n for n in vals if n not in names]
print("| metric | " + " | ".join(r[0] for r in reports) + " |")
print("|---|" + "---|" * len(reports))
print("| kernel | " + " | ".join(r[1] for r in reports) + " |")
for n in names:
    cells = []
    for _, _, vals in reports:
        v = vals.get(n)
        cells.append("%s %s" % v if v else "")
    print("| %s | %s |" % (n, " | ".join(cells)))
