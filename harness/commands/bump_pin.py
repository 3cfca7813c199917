"""Bump the pinned llama-cpp-python as one procedure: build it, compare, record everything again, report.

    python -m harness bump-pin 0.3.37 --jobs 2        # -> reports/bump-0.3.37/ (bump.md, bump.json, builds/)

Builds the release (the portable wheel noxfile.py builds), compares it with the pinned build
(`builds --against llama.cpp@VERSION`: every golden and live case, code point and chat template),
and records the goldens, the code-point records, the chat goldens, the sdist manifests, the chat
targets and the Unicode tables again under it INTO A GIT WORK TREE of HEAD (--work-tree, default
<report>/work-tree) whose pin is the new version. Nothing in the checkout is overwritten: the change
report (bump.md, bump.json: each step's time and how it ended, what changed per vocabulary, the
differences with both sides) says what the new build changes, for review; adopting it is a commit in
the work tree (bump.md prints the commands). docs/golden.md, "Bumping the pin", is the procedure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..environment import project_root
from ..files.atomic import check_output_folder
from ..models.pin import LLAMA_CPP_PYTHON_VERSION

EXIT_STATUS = {
    0: "the new build changes nothing: every recorded file is the same and the builds agree",
    1: "the new build changes something: the change report says what, per vocabulary (for review)",
    2: "a step failed (the report names it and what was not done), or bad input",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("version", metavar="VERSION", help="the llama-cpp-python release to pin, X.Y.Z")
    parser.add_argument("--report", type=Path, default=None, metavar="DIR",
                        help="where the change report goes (default reports/bump-VERSION)")
    parser.add_argument("--work-tree", type=Path, default=None, metavar="DIR",
                        help="the git work tree the new records go into (default <report>/work-tree; must not exist)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="llama.cpp workers and compile jobs")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def run(args: argparse.Namespace) -> int:
    from ..errors import SetupError
    from ..report import bump as change_report
    from ..runs import bump as procedure

    if args.jobs < 1:
        raise SetupError("--jobs must be at least 1")
    report = (args.report or Path("reports") / f"bump-{args.version}").resolve()
    work_tree = (args.work_tree or report / "work-tree").resolve()
    checkout = project_root()
    procedure.check(args.version, checkout, work_tree)
    check_output_folder(report, "--report")
    bump = procedure.Bump(version=args.version, checkout=checkout, work_tree=work_tree, report=report,
                          jobs=args.jobs)

    def log(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    steps = procedure.prepare(bump, log)
    if all(s["exit_code"] == 0 for s in steps):
        steps += procedure.record(bump, log)
    steps.append(procedure.compare(bump, log))
    files = procedure.changed_files(work_tree) if work_tree.is_dir() else []
    data = change_report.report(
        bump={"from": LLAMA_CPP_PYTHON_VERSION, "to": args.version, "work_tree": str(work_tree),
              "checkout": str(checkout)},
        steps=steps, files=files, points=change_report.code_point_changes(checkout, work_tree),
        builds_dir=report / "builds", changes=change_report.file_changes(checkout, work_tree, files))
    json_path, md_path = change_report.write(data, report)
    for row in data["vocabularies"]:
        print(f"  {row['vocabulary']}: golden cases changed {row['cases_changed'] or '-'}, "
              f"code-point calls changed {row['code_point_calls_changed'] or '-'}, "
              f"differences {row['differences'] if row['differences'] is not None else '-'}")
    print(data["builds"]["verdict"] or "the builds were not compared")
    if data["failed_steps"]:
        print(f"failed steps: {', '.join(data['failed_steps'])}")
    print(f"change report: {md_path}, {json_path}; work tree: {work_tree}")
    return change_report.exit_status(data)
