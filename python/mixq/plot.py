"""Plots of benchmark results (matplotlib, PNG).

    python -m mixq.plot results.json -o out.png      # `mixq bench --json` or bench_model JSON

`mixq bench --json` results: one column per layer shape (N x K); rows: the speedup over the
dense baseline versus M, the achieved bandwidth (GB/s) against the bandwidth ceiling, and the
achieved TFLOP/s against the compute ceiling. The bandwidth ceiling is the streaming-read
ceiling the bench measured (parsed from its "device" line) unless --ceiling-gbs is given; the
compute ceiling is --ceiling-tflops, or else the best dense-baseline TFLOP/s in the same file
(a measured, not a nominal, ceiling). `python -m mixq.bench_model --json` results: tokens/s per
scheme and batch, with the speedup over BF16 written on each bar.
"""

import argparse
import json
import re
import sys

__all__ = ["plot_bench", "plot_model", "main"]


def _plt():
    import matplotlib
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt
    return plt


def _bandwidth_ceiling(doc):
    m = re.search(r"ceiling ([0-9.]+) TB/s", doc.get("device", ""))
    return float(m.group(1)) * 1000 if m else None


def plot_bench(doc, out, ceiling_gbs=None, ceiling_tflops=None, title=None):
    """Render `mixq bench --json` results (a dict) to the PNG file `out`."""
    plt = _plt()
    rows = doc["results"]
    shapes = sorted({(r["N"], r["K"]) for r in rows}, key=lambda s: s[0] * s[1])
    label = lambda r: r["scheme"] if r["act"] in ("weight-only", "f32 weights") else f"{r['scheme']}:{r['act']}"
    schemes = sorted({label(r) for r in rows if r["scheme"] != "dense"})
    gbs_ceiling = ceiling_gbs or _bandwidth_ceiling(doc)
    dense = [r for r in rows if r["scheme"] == "dense"]
    tf_ceiling = ceiling_tflops or (max(r["tflop_per_s"] for r in dense) if dense else None)
    tf_label = "compute ceiling" if ceiling_tflops else "best dense baseline (measured)"
    fig, axes = plt.subplots(3, len(shapes), figsize=(3.2 * len(shapes) + 1, 9.5),
                             squeeze=False, sharex=True)
    colors = {s: f"C{i}" for i, s in enumerate(schemes + ["dense"])}
    for j, (N, K) in enumerate(shapes):
        sub = [r for r in rows if (r["N"], r["K"]) == (N, K)]
        for s in schemes + ["dense"]:
            pts = sorted((r for r in sub if (label(r) if r["scheme"] != "dense" else "dense") == s),
                         key=lambda r: r["M"])
            if not pts:
                continue
            M = [r["M"] for r in pts]
            style = dict(color=colors[s], marker="o", ms=3, label=s,
                         ls="--" if s == "dense" else "-")
            if s != "dense":
                axes[0][j].plot(M, [r["speedup_vs_baseline"] for r in pts], **style)
            axes[1][j].plot(M, [r["gb_per_s"] for r in pts], **style)
            axes[2][j].plot(M, [r["tflop_per_s"] for r in pts], **style)
        axes[0][j].axhline(1.0, color="gray", lw=0.8)
        axes[0][j].set_title(f"N={N} K={K}", fontsize=9)
        if gbs_ceiling:
            axes[1][j].axhline(gbs_ceiling, color="k", lw=0.8, ls=":")
        if tf_ceiling:
            axes[2][j].axhline(tf_ceiling, color="k", lw=0.8, ls=":")
        for i in range(3):
            axes[i][j].set_xscale("log", base=2)
            axes[i][j].grid(True, alpha=0.3)
        axes[2][j].set_xlabel("M (tokens)")
    axes[0][0].set_ylabel(f"speedup over\n{doc.get('baseline', 'dense')}")
    axes[1][0].set_ylabel("GB/s" + (f"\n(dotted: ceiling {gbs_ceiling:.0f})" if gbs_ceiling else ""))
    axes[2][0].set_ylabel("TFLOP/s" + (f"\n(dotted: {tf_label})" if tf_ceiling else ""))
    axes[1][-1].legend(fontsize=8, loc="best")
    fig.suptitle(title or f"mixq bench: {doc.get('backend', '')} "
                 f"{doc.get('device', '').split(' (')[0]}", fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def plot_model(doc, out, title=None):
    """Render `python -m mixq.bench_model --json` results (a dict) to the PNG file `out`."""
    plt = _plt()
    rows = doc["results"]
    schemes = list(dict.fromkeys(r["scheme"] for r in rows))
    batches = sorted({r["batch"] for r in rows})
    width = 0.8 / len(schemes)
    fig, ax = plt.subplots(figsize=(2.2 + 1.6 * len(batches), 4.5))
    for i, s in enumerate(schemes):
        vals = {r["batch"]: r for r in rows if r["scheme"] == s}
        xs = [b + (i - (len(schemes) - 1) / 2) * width for b in range(len(batches))]
        ys = [vals[b]["tokens_per_s"] if b in vals else 0 for b in batches]
        bars = ax.bar(xs, ys, width, label=s, color=f"C{i}")
        for bar, b in zip(bars, batches):
            if b in vals and i > 0:
                ax.annotate(f"{vals[b]['speedup']:.2f}x", (bar.get_x() + bar.get_width() / 2,
                            bar.get_height()), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(batches)))
    ax.set_xticklabels([f"batch {b}" for b in batches])
    ax.set_ylabel("decode tokens/s")
    first = rows[0]
    ax.set_title(title or f"mixq bench_model: {first['model']} ({first['device']}, "
                 f"compile={first['compile']})", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv=None):
    """Command line entry point (see the module docstring)."""
    p = argparse.ArgumentParser(prog="python -m mixq.plot", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", help="a `mixq bench --json` or `python -m mixq.bench_model "
                   "--json` file")
    p.add_argument("-o", "--output", required=True, help="PNG file to write")
    p.add_argument("--ceiling-gbs", type=float, default=None, help="bandwidth ceiling, GB/s")
    p.add_argument("--ceiling-tflops", type=float, default=None, help="compute ceiling, TFLOP/s")
    p.add_argument("--title", default=None)
    a = p.parse_args(argv)
    with open(a.results) as f:
        doc = json.load(f)
    if doc.get("kind") == "mixq.bench_model":
        plot_model(doc, a.output, a.title)
    elif "results" in doc and doc["results"] and "speedup_vs_baseline" in doc["results"][0]:
        plot_bench(doc, a.output, a.ceiling_gbs, a.ceiling_tflops, a.title)
    else:
        print(f"{a.results}: neither `mixq bench --json` nor bench_model results", file=sys.stderr)
        return 2
    print(f"wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
