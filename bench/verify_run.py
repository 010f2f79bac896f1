"""What ``ithaca verify`` costs over running the same tests bare.

``ithaca verify`` runs the project's test runner itself: it takes the project's content
digest, starts the runner in the validator sandbox (bubblewrap) with Ithaca's own
environment and a report to read back, takes the digest again (a run the project changed
under is no evidence), and records the run. This script builds a pytest project of
``--tests`` tests (each a little arithmetic and a short sleep, so the suite runs about
``--tests`` × 10 ms, like a small real suite), warms both paths once, then times in
alternation, in the same run:

- *bare*: ``python -m pytest -q -p no:cacheprovider`` in the project, a plain subprocess;
- *bare+junit*: the same with the JUnit report Ithaca asks for (``--junitxml``), to show
  what the report itself costs;
- *verify*: ``VerificationService.verify(fresh=True)``, as the CLI and the MCP tool call it
  (a fresh run each time: the same content would otherwise be reused);
- *reuse*: ``verify()`` on unchanged content, which finds the settled run and runs nothing;

and prints the medians and the ratio verify/bare (goal: at most 1.1 once the sandbox is
warm).

    .venv/bin/python bench/verify_run.py [--quick] [--tests N] [--runs N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import new_project, parser, scratch, verdict

GOAL = 1.1
TEST = """
def test_{n}():
    import time
    time.sleep(0.01)
    assert sum(range({n} + 10)) == ({n} + 10) * ({n} + 9) // 2
"""


def build(root: Path, tests: int) -> None:
    (root / "pytest.ini").write_text("[pytest]\n")
    folder = root / "tests"
    folder.mkdir()
    for start in range(0, tests, 50):
        body = "".join(TEST.format(n=n) for n in range(start, min(start + 50, tests)))
        (folder / f"test_part_{start // 50:02d}.py").write_text(body)


def main() -> None:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--tests", type=int, default=200)
    options.add_argument("--runs", type=int, default=7)
    args = options.parse_args()
    runs = 3 if args.quick else args.runs
    with scratch() as root:
        project = new_project(root)
        # The sandbox's PATH: this interpreter's folder first, so ``python3`` has pytest.
        project.config["validators"]["path"] = f"{Path(sys.executable).parent}:/usr/bin:/bin"
        here = Path(project.project.root)
        build(here, args.tests)
        bare_argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        service = project.verification

        def bare() -> float:
            began = time.perf_counter()
            done = subprocess.run(bare_argv, cwd=here, capture_output=True, check=False)
            assert done.returncode == 0, done.stdout.decode()[-2000:]
            return time.perf_counter() - began

        def bare_junit() -> float:
            began = time.perf_counter()
            report = ["--junitxml", str(root / "bare.xml")]
            done = subprocess.run([*bare_argv, *report], cwd=here, capture_output=True, check=False)
            assert done.returncode == 0, done.stdout.decode()[-2000:]
            return time.perf_counter() - began

        def verify() -> float:
            began = time.perf_counter()
            answer = service.verify(fresh=True)
            assert answer["status"] == "passed", answer
            assert answer["counts"]["passed"] == args.tests, answer
            return time.perf_counter() - began

        def reuse() -> float:
            began = time.perf_counter()
            answer = service.verify()
            assert answer["reused"], answer
            return time.perf_counter() - began

        bare()
        bare_junit()
        verify()  # warm: the sandbox, the digest's cache, the interpreter's files
        timings: dict[str, list[float]] = {"bare": [], "junit": [], "verify": [], "reuse": []}
        for _ in range(runs):
            timings["bare"].append(bare())
            timings["junit"].append(bare_junit())
            timings["verify"].append(verify())
            timings["reuse"].append(reuse())
        project.close()
    medians = {name: statistics.median(values) for name, values in timings.items()}
    ratio = medians["verify"] / medians["bare"]
    print(f"{args.tests} pytest tests, {runs} alternating runs each (medians):")
    print(f"  bare pytest            {medians['bare'] * 1000:8.0f} ms")
    print(f"  bare pytest + JUnit    {medians['junit'] * 1000:8.0f} ms")
    print(f"  ithaca verify (fresh)  {medians['verify'] * 1000:8.0f} ms")
    print(f"  ithaca verify (reuse)  {medians['reuse'] * 1000:8.0f} ms")
    print(f"  verify / bare          {ratio:8.2f}x  (goal <= {GOAL}x) {verdict(ratio <= GOAL)}")
    print(f"  verify / bare+JUnit    {medians['verify'] / medians['junit']:8.2f}x")


if __name__ == "__main__":
    main()
