"""`make screenshots`: pictures of the viewer's main pages and of the HTML report, for the docs.

Runs the offline demo (`examples/demo.py`, a small size) into a temporary directory,
serves it with `wink debug`'s server on a free loopback port, and drives Debian's
headless Chromium (Playwright, `/usr/bin/chromium`) over the pages:

- `viewer-run.png` / `viewer-run-dark.png`: the run page (cards, provenance, charts,
  failure groups);
- `viewer-sample.png`: the sample page of a failed result;
- `viewer-errored.png`: an errored result: its partial transcript, each turn's tokens and cost;
- `viewer-compare.png`: the A/B page (paired statistics, charts, flipped samples);
- `viewer-pair.png`: a flipped sample side by side, with the diff of its outputs;
- `report.png`: the self-contained HTML report (`wink eval report --html`).

Written to `docs/images/` (or `--out DIR`) at 1366 x 768, a laptop's screen; the page is
captured down to `--height` pixels. Nothing is fetched from the network.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
VIEWPORT = {"width": 1366, "height": 768}


def run_demo(runs_dir: Path, n: int) -> Path:
    """Run the offline demo into `runs_dir`; returns the run directory."""
    command = [sys.executable, str(ROOT / "examples" / "demo.py"), "--n", str(n),
               "--runs-dir", str(runs_dir)]  # fmt: skip
    subprocess.run(command, check=True, cwd=runs_dir, stdout=subprocess.DEVNULL)
    (run,) = [p for p in runs_dir.iterdir() if (p / "results.jsonl").is_file()]
    return run


def shoot(page: Any, url: str, path: Path, height: int, *, open_: str | None = None) -> None:
    """Open `url` (and the `<details>` matching `open_`), capture its top `height` pixels."""
    page.goto(url)
    page.wait_for_load_state("networkidle")
    page.locator("body:not([data-loading])").wait_for(state="attached")
    if open_ is not None:
        page.locator(f"{open_} > summary").click()
    full = page.evaluate("document.documentElement.scrollHeight")
    clip = {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": min(full, height)}
    page.screenshot(path=str(path), clip=clip, full_page=True)
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--n", type=int, default=80, help="demo questions")
    parser.add_argument("--height", type=int, default=1400, help="pixels captured per page")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from weakincentives.debug import ViewerServer, write_html_report
    from weakincentives.evals import EvalReport

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        run = run_demo(Path(tmp), args.n)
        report = write_html_report(EvalReport.load(run), Path(tmp) / "report.html")
        with ViewerServer(run) as server, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for scheme in ("light", "dark"):
                context = browser.new_context(viewport=VIEWPORT, color_scheme=scheme)
                page = context.new_page()
                base = f"{server.url}#/run/{run.name}"
                if scheme == "dark":
                    shoot(page, base, args.out / "viewer-run-dark.png", args.height)
                    context.close()
                    continue
                shoot(page, base, args.out / "viewer-run.png", args.height, open_="#provenance")
                page.goto(f"{base}?status=failed")
                failed = page.locator('#results tr[data-status="failed"] a.sample-link')
                first = failed.first.get_attribute("href")
                shoot(page, f"{server.url}{first}", args.out / "viewer-sample.png", args.height)
                page.goto(f"{base}?status=error")
                errored = page.locator('#results tr[data-status="error"] a.sample-link')
                href = errored.first.get_attribute("href")
                shoot(page, f"{server.url}{href}", args.out / "viewer-errored.png", args.height)
                compare = f"{server.url}#/compare?base_run={run.name}"
                shoot(page, compare, args.out / "viewer-compare.png", args.height)
                pair = page.locator("a.pair-link").first.get_attribute("href")
                shoot(page, f"{server.url}{pair}", args.out / "viewer-pair.png", args.height)
                shoot(page, report.as_uri(), args.out / "report.png", args.height)
                context.close()
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
