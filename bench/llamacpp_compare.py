#!/usr/bin/env python3
"""mixq against llama.cpp on the same GGUF tensors, in the same run, with the same threads.

For every thread count and ggml type of the file, runs `mixq bench FILE --only TYPE --json` and
bench/llamacpp_driver (built by scripts/build_llamacpp.sh) on the same tensors, alternating which
goes first, and writes the ratios llama.cpp time / mixq time (> 1: mixq is faster) as markdown
and JSON. Both sides time cold weights the same way (CPU: the last-level cache evicted before
each timed call; GPU: copies rotated) and report medians.

    python3 bench/make_bench_gguf.py -o /tmp/bench.gguf
    scripts/build_llamacpp.sh LLAMA_SRC third_party-build/native native
    python3 bench/llamacpp_compare.py --gguf /tmp/bench.gguf --mixq build-cpu/mixq \\
        --driver third_party-build/native/bin/llamacpp_driver --threads 1,2 --m 1,4,16,64,512 \\
        -o bench/results/cpu_vs_llamacpp
    # AVX2-only: llama.cpp built with `avx2`, mixq with MIXQ_CPU_ISA=avx2
    python3 bench/llamacpp_compare.py ... --driver third_party-build/avx2/bin/llamacpp_driver \\
        --mixq-env MIXQ_CPU_ISA=avx2 --label avx2 -o bench/results/cpu_vs_llamacpp_avx2
    # CUDA (a GPU machine): llama.cpp built with `cuda`
    python3 bench/llamacpp_compare.py ... --backend cuda --driver .../cuda/bin/llamacpp_driver
"""
import argparse
import datetime
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def fail(msg):
    sys.exit(f"llamacpp_compare: {msg}")


def int_list(text, what):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        fail(f"{what}: '{text}' is not a comma-separated list of integers")
    if not values or any(v < 1 for v in values):
        fail(f"{what}: '{text}': every value must be >= 1")
    return values


def run(cmd, env=None, what=""):
    print("+ " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p


def machine():
    model = platform.processor() or "unknown"
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        m = re.search(r"^Model name:\s*(.+)$", out, re.M)
        if m:
            model = m.group(1).strip()
        flags = re.search(r"^Flags:\s*(.+)$", out, re.M)
        isa = sorted(f for f in (flags.group(1).split() if flags else [])
                     if f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8"))
    except OSError:
        isa = []
    return {"cpu": model, "cores": os.cpu_count(), "isa_flags": isa}


def git_commit():
    try:
        c = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               stdout=subprocess.PIPE, text=True).stdout.strip()
        return c + ("+dirty" if dirty else "")
    except OSError:
        return "unknown"


def gguf_types(path):
    """The tensor-name prefixes (ggml types, as make_bench_gguf.py names them) in file order."""
    from gguf import GGUFReader  # the pinned gguf package (requirements-test.txt)

    seen = []
    for t in GGUFReader(path).tensors:
        if len(t.shape) != 2:
            continue
        prefix = t.name.split(".", 1)[0]
        if prefix not in seen:
            seen.append(prefix)
    return seen


def time_mixq(args, gguf, prefix, threads, tmp):
    out = os.path.join(tmp, f"mixq_{prefix}_{threads}.json")
    cmd = [args.mixq, "bench", gguf, "--only", "^" + re.escape(prefix) + r"\.", "--m", args.m,
           "--reps", str(args.reps), "--backend", args.backend, "--no-progress", "--json", out]
    if args.backend == "cpu":
        cmd += ["--threads", str(threads)]
    env = dict(os.environ)
    for kv in args.mixq_env:
        k, _, v = kv.partition("=")
        env[k] = v
    p = run(cmd, env=env)
    if p.returncode not in (0, 1) or not os.path.exists(out):
        fail(f"mixq bench failed ({p.returncode}):\n{p.stderr}{p.stdout[-2000:]}")
    doc = json.load(open(out))
    if p.returncode == 1:
        print(f"warning: mixq bench reported results beyond tolerance:\n{p.stderr}", file=sys.stderr)
    rows = {}
    for g in doc["groups"]:
        for r in g["results"]:
            rows[(g["tensors"][0], r["M"])] = (g, r)
    return doc, rows


def time_llamacpp(args, gguf, prefix, threads, tmp):
    out = os.path.join(tmp, f"llama_{prefix}_{threads}.json")
    cmd = [args.driver, "--file", gguf, "--only", prefix + ".", "--m", args.m, "--reps", str(args.reps),
           "--backend", args.backend, "--json", out]
    if args.backend == "cpu":
        cmd += ["--threads", str(threads)]
    if args.exclude_buffer:
        cmd += ["--exclude-buffer", args.exclude_buffer]
    p = run(cmd)
    if p.returncode != 0 or not os.path.exists(out):
        fail(f"llamacpp_driver failed ({p.returncode}):\n{p.stderr[-3000:]}")
    doc = json.load(open(out))
    return doc, {(r["name"], r["M"]): r for r in doc["results"]}


def geomean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


def write_markdown(path, doc):
    ms = doc["m"]
    lines = [f"# mixq vs llama.cpp: {doc['label']} ({doc['backend']})", ""]
    lines += [f"- command: `{doc['command']}`", f"- date: {doc['date']}",
              f"- machine: {doc['machine']['cpu']}, {doc['machine']['cores']} cores "
              f"({', '.join(doc['machine']['isa_flags'])})",
              f"- mixq: commit {doc['mixq_commit']}, kernels {doc['mixq_cpu_isa']}"
              + (f", environment {' '.join(doc['mixq_env'])}" if doc["mixq_env"] else ""),
              f"- llama.cpp: ggml {doc['llamacpp']['ggml_version']}, build: {doc['llamacpp']['build']}; "
              f"weight buffers tried in order: {doc['llamacpp']['buffer_types']}"
              + (f" (left out: {doc['llamacpp']['excluded']})" if doc["llamacpp"]["excluded"] else ""),
              f"- timing: medians of up to {doc['reps']} calls per case (at least 2, ~0.2 s), cold weights "
              "(CPU: last-level cache evicted before each timed call, on both sides)"
              + (f"; {doc['repeat']} sweeps, each side's time its best sweep (load from other work only "
                 "adds time), the per-sweep ratios' range in brackets" if doc["repeat"] > 1 else "; one sweep"),
              f"- ratio = llama.cpp time / mixq time (> 1: mixq faster); target {doc['target']}x", ""]
    for note in doc["notes"]:
        lines.append(f"> {note}")
    if doc["notes"]:
        lines.append("")
    for t in doc["threads"]:
        rows = [r for r in doc["results"] if r["threads"] == t]
        ratios = [r["ratio"] for r in rows if r["ratio"]]
        hit = sum(1 for x in ratios if x >= doc["target"])
        title = f"## {t} thread(s)" if doc["backend"] == "cpu" else "## GPU"
        lines += [title, "",
                  f"geomean {geomean(ratios):.2f}x, min {min(ratios):.2f}x, max {max(ratios):.2f}x; "
                  f"{hit}/{len(ratios)} cases >= {doc['target']}x", ""]
        lines.append("| type | KxN | " + " | ".join(f"M={m}" for m in ms) + " |")
        lines.append("|---|---|" + "---|" * len(ms))
        keys = []
        for r in rows:
            if (r["type"], r["K"], r["N"]) not in keys:
                keys.append((r["type"], r["K"], r["N"]))
        for typ, K, N in keys:
            cells = []
            for m in ms:
                r = next((x for x in rows if (x["type"], x["K"], x["N"], x["M"]) == (typ, K, N, m)), None)
                if not (r and r["ratio"]):
                    cells.append("-")
                elif doc["repeat"] > 1 and r["ratio_min"] is not None:
                    cells.append(f"{r['ratio']:.2f}x [{r['ratio_min']:.2f}-{r['ratio_max']:.2f}]")
                else:
                    cells.append(f"{r['ratio']:.2f}x")
            lines.append(f"| {typ} | {K}x{N} | " + " | ".join(cells) + " |")
        lines += ["", "Times in us, mixq / llama.cpp (mixq kernel; llama.cpp weight buffer):", ""]
        lines.append("| type | KxN | " + " | ".join(f"M={m}" for m in ms) + " |")
        lines.append("|---|---|" + "---|" * len(ms))
        for typ, K, N in keys:
            cells = []
            for m in ms:
                r = next((x for x in rows if (x["type"], x["K"], x["N"], x["M"]) == (typ, K, N, m)), None)
                cells.append(f"{r['mixq_us']:.0f} / {r['llamacpp_us']:.0f}" if r and r["mixq_us"] else "-")
            lines.append(f"| {typ} | {K}x{N} | " + " | ".join(cells) + " |")
        lines += ["", "Kernels (mixq by M; llama.cpp weight buffer):", ""]
        for typ in dict.fromkeys(k[0] for k in keys):
            by_kernel = {}
            for r in rows:
                if r["type"] == typ and r["M"] not in by_kernel.setdefault(r["mixq_kernel"], []):
                    by_kernel[r["mixq_kernel"]].append(r["M"])
            buffers = sorted({r["llamacpp_buffer"] for r in rows if r["type"] == typ})
            lines.append(f"- {typ}: mixq " + "; ".join(
                f"{k} (M={','.join(str(m) for m in sorted(v))})" for k, v in by_kernel.items())
                + f"; llama.cpp {', '.join(buffers)}")
        lines.append("")
        reads = [r for r in rows if r["M"] == 1 and r.get("plain_read_us") and r["mixq_us"]]
        if reads:
            lines += ["M = 1 against a plain streaming read of the same file bytes (cold, timed as the "
                      "kernels are; `mixq bench` measures it in the same run): read time / kernel time", "",
                      "| type | KxN | plain read us | mixq us | mixq | llama.cpp us | llama.cpp |",
                      "|---|---|---|---|---|---|---|"]
            for r in reads:
                lines.append(f"| {r['type']} | {r['K']}x{r['N']} | {r['plain_read_us']:.1f} | {r['mixq_us']:.1f} | "
                             f"{r['plain_read_us'] / r['mixq_us']:.2f} | {r['llamacpp_us']:.1f} | "
                             f"{r['plain_read_us'] / r['llamacpp_us']:.2f} |")
            lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", help="GGUF file (written by make_bench_gguf.py when missing)")
    ap.add_argument("--mixq", default=os.path.join(REPO, "build-cpu", "mixq"), help="the mixq binary")
    ap.add_argument("--driver", help="llamacpp_driver built by scripts/build_llamacpp.sh")
    ap.add_argument("--render", metavar="JSON",
                    help="no timing: rewrite OUTPUT.md (and .json) from this JSON, with the --note lines "
                         "added (marked as added after the run)")
    ap.add_argument("--build-info", help="build-info.txt of that build (default: beside bin/)")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", default="1,2", help="CPU thread counts (ignored for cuda)")
    ap.add_argument("--m", default="1,4,16,64,512")
    ap.add_argument("--reps", type=int, default=5, help="timed calls per case, at most (both sides)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="sweeps over everything; each side's time is its best sweep's median, and the "
                         "spread of the per-sweep ratios is reported (noise)")
    ap.add_argument("--types", help="comma-separated type prefixes (default: every one in the file)")
    ap.add_argument("--mixq-env", action="append", default=[], metavar="KEY=VALUE",
                    help="environment for mixq (e.g. MIXQ_CPU_ISA=avx2); repeatable")
    ap.add_argument("--exclude-buffer", default="", help="llama.cpp buffer types to leave out (e.g. AMX)")
    ap.add_argument("--note", action="append", default=[], help="a line for the report; repeatable")
    ap.add_argument("--target", type=float, default=1.3)
    ap.add_argument("--label", default="native")
    ap.add_argument("-o", "--output", required=True, help="output path without extension (.md, .json)")
    args = ap.parse_args(argv)

    if args.render:
        doc = json.load(open(args.render))
        doc["notes"] = doc.get("notes", []) + [f"(added after the run) {n}" for n in args.note]
        with open(args.output + ".json", "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        write_markdown(args.output + ".md", doc)
        print(f"wrote {args.output}.md and {args.output}.json", file=sys.stderr)
        return
    if not args.gguf or not args.driver:
        fail("--gguf and --driver are required (unless --render)")
    int_list(args.m, "--m")
    threads = int_list(args.threads, "--threads") if args.backend == "cpu" else [0]
    if args.reps < 1:
        fail("--reps must be >= 1")
    if args.repeat < 1:
        fail("--repeat must be >= 1")
    for kv in args.mixq_env:
        if "=" not in kv:
            fail(f"--mixq-env: '{kv}' is not KEY=VALUE")
    for exe, what in ((args.mixq, "--mixq"), (args.driver, "--driver")):
        if not os.access(exe, os.X_OK):
            fail(f"{what}: '{exe}' is not an executable")
    if not os.path.exists(args.gguf):
        p = run([sys.executable, os.path.join(HERE, "make_bench_gguf.py"), "-o", args.gguf])
        if p.returncode != 0:
            fail(f"make_bench_gguf.py failed:\n{p.stderr}")
    types = args.types.split(",") if args.types else gguf_types(args.gguf)
    build_info = args.build_info or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(args.driver))),
                                                 "build-info.txt")
    build = "unknown"
    if os.path.exists(build_info):
        text = open(build_info).read()
        variant = re.search(r"^variant: (.+)$", text, re.M)
        flags = re.search(r"^cmake flags: (.+)$", text, re.M)
        build = f"{variant.group(1) if variant else '?'} ({flags.group(1) if flags else '?'})"

    samples, mixq_doc, llama_doc = {}, None, None
    with tempfile.TemporaryDirectory(prefix="llamacpp_compare_") as tmp:
        step = 0
        for sweep in range(args.repeat):
            for t in threads:
                for prefix in types:
                    # Alternate which side goes first, so that a drift of the machine's load or
                    # clock over the run does not favour one of them.
                    if step % 2 == 0:
                        mixq_doc, mq = time_mixq(args, args.gguf, prefix, t, tmp)
                        llama_doc, ll = time_llamacpp(args, args.gguf, prefix, t, tmp)
                    else:
                        llama_doc, ll = time_llamacpp(args, args.gguf, prefix, t, tmp)
                        mixq_doc, mq = time_mixq(args, args.gguf, prefix, t, tmp)
                    step += 1
                    line = []
                    for (name, m), lr in sorted(ll.items()):
                        g, r = mq.get((name, m), (None, None))
                        s = samples.setdefault((t, name, m), {"llama": [], "mixq": [], "lr": lr, "r": r})
                        s["llama"].append(lr["time_us"])
                        if r and not r.get("unsupported"):
                            s["mixq"].append(r["time_us"])
                            s["r"] = r
                            line.append(f"{lr['K']}x{lr['N']} M={m} {lr['time_us'] / r['time_us']:.2f}x")
                    print(f"sweep {sweep + 1} threads {t} {prefix}: " + ", ".join(line), file=sys.stderr, flush=True)

    results = []
    for (t, name, m), s in samples.items():
        lr, r = s["lr"], s["r"]
        # Best of the sweeps, each side: other work on the machine only ever adds time, so the
        # fastest sweep is the least disturbed estimate of both.
        mixq_us = min(s["mixq"]) if s["mixq"] else None
        llama_us = min(s["llama"])
        per_sweep = [a / b for a, b in zip(s["llama"], s["mixq"])] if len(s["mixq"]) == len(s["llama"]) else []
        results.append({
            "tensor": name, "type": lr["type"].upper(), "K": lr["K"], "N": lr["N"], "M": m, "threads": t,
            "mixq_us": mixq_us, "mixq_kernel": r.get("kernel", "unsupported") if r else "missing",
            "mixq_ok": r.get("ok") if r else None, "mixq_sweeps_us": s["mixq"],
            "plain_read_us": r.get("plain_read_us") if r else None,
            "llamacpp_us": llama_us, "llamacpp_buffer": lr["buffer"], "llamacpp_sweeps_us": s["llama"],
            "ratio": llama_us / mixq_us if mixq_us else None,
            "ratio_min": min(per_sweep) if per_sweep else None,
            "ratio_max": max(per_sweep) if per_sweep else None,
        })
    results.sort(key=lambda r: (r["threads"], types.index(r["tensor"].split(".", 1)[0])
                                if r["tensor"].split(".", 1)[0] in types else 0, r["tensor"], r["M"]))

    doc = {
        "command": " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "label": args.label, "backend": args.backend, "machine": machine(),
        "mixq_commit": git_commit(), "mixq_env": args.mixq_env,
        "mixq_cpu_isa": mixq_doc.get("cpu_isa", "-") if mixq_doc else "-",
        "mixq_device": mixq_doc.get("device") if mixq_doc else None,
        "llamacpp": {"ggml_version": llama_doc.get("ggml_version") if llama_doc else None,
                     "device": llama_doc.get("device") if llama_doc else None,
                     "buffer_types": llama_doc.get("buffer_types") if llama_doc else None,
                     "excluded": args.exclude_buffer, "build": build},
        "threads": threads, "m": int_list(args.m, "--m"), "reps": args.reps, "repeat": args.repeat,
        "target": args.target,
        "notes": args.note, "gguf": os.path.abspath(args.gguf),
        "results": results,
    }
    summary = {}
    for t in threads:
        ratios = [r["ratio"] for r in results if r["threads"] == t and r["ratio"]]
        summary[str(t)] = {"geomean": geomean(ratios), "min": min(ratios) if ratios else None,
                           "max": max(ratios) if ratios else None, "cases": len(ratios),
                           "at_or_above_target": sum(1 for x in ratios if x >= args.target)}
    doc["summary"] = summary
    with open(args.output + ".json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    write_markdown(args.output + ".md", doc)
    print(f"wrote {args.output}.md and {args.output}.json", file=sys.stderr)
    for t, s in summary.items():
        print(f"threads {t}: geomean {s['geomean']:.2f}x, min {s['min']:.2f}x, "
              f"{s['at_or_above_target']}/{s['cases']} >= {args.target}x", file=sys.stderr)


if __name__ == "__main__":
    main()
