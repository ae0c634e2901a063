"""What lives where: ``qkv`` holds the math and the seeds' worked examples, and none of the course's
machinery; each problem set's own slips sit beside it.

A student reads ``qkv``; drawing every student's own numbers (:mod:`qkv_exercises.variants`),
checking and grading are course machinery and stay out of it. These tests read the source, so
that a function moved back into ``qkv`` fails here and not only in a review.
"""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

import qkv.examples
from qkv_exercises import variants
from qkv_exercises.problem_sets import SLIPS_SUFFIX, names

from .conftest import ROOT

QKV = ROOT / "src" / "qkv"
PROBLEM_SETS = ROOT / "src" / "qkv_exercises" / "problem_sets"
MACHINERY = ("qkv_exercises", "qkv_grading", "qkv_book")
# The names of the variant search (qkv_exercises.variants): the stream, its tests, and the stages that
# list or draw the workable choices.
VARIANT_SEARCH = re.compile(r"VariantDraw|apart_from_seed|all_differ|APART_FROM_SEED|^MAX_ATTEMPTS$"
                            r"|_workable_|candidate|_variant$")


def qkv_modules() -> dict[str, ast.Module]:
    modules = {str(path.relative_to(QKV.parent)): ast.parse(path.read_text(encoding="utf-8"))
               for path in sorted(QKV.rglob("*.py"))}
    assert "qkv/examples/delivery.py" in modules, "qkv's modules were not found where this test looks"
    return modules


def imported_modules(tree: ast.Module) -> set[str]:
    """Every module an ``import`` names, at any depth, and every string passed to import_module or __import__."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__"):
            found.update(arg.value for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str))
    return found


def defined_names(tree: ast.Module) -> set[str]:
    """Every function, class and assigned name, at any depth."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update(t.id for t in targets if isinstance(t, ast.Name))
    return found


def test_no_module_of_qkv_imports_the_course_machinery():
    """qkv imports neither qkv_exercises, qkv_grading nor qkv_book, not even inside a function."""
    found = [f"{path}: {module}" for path, tree in qkv_modules().items() for module in imported_modules(tree)
             if module.split(".")[0] in MACHINERY]
    assert not found, f"qkv imports course machinery: {found}"


def test_no_module_of_qkv_defines_the_variant_search():
    """No function, class or constant of qkv is named as the variant search's are."""
    found = [f"{path}: {name}" for path, tree in qkv_modules().items() for name in defined_names(tree)
             if VARIANT_SEARCH.search(name)]
    assert not found, f"variant machinery in qkv (it belongs in qkv_exercises.variants): {found}"


def test_the_worked_examples_take_no_variant():
    """Every example of qkv.examples is the seed's own: none takes a variant (qkv_exercises.variants does)."""
    taking = [name for name in qkv.examples.__all__ if callable(getattr(qkv.examples, name))
              and not inspect.isclass(getattr(qkv.examples, name))
              and "variant" in inspect.signature(getattr(qkv.examples, name)).parameters]
    assert not taking, f"qkv.examples functions that take a variant: {taking}"


def test_every_varied_example_has_its_seed_in_qkv():
    """Each function of qkv_exercises.variants varies the qkv.examples function of the same name."""
    varied = [name for name in variants.__all__ if name.endswith("_example")]
    assert varied, "qkv_exercises.variants lists no example"
    missing = [name for name in varied if name not in qkv.examples.__all__]
    assert not missing, f"variants of examples qkv.examples does not have: {missing}"


def test_importing_all_of_qkv_loads_no_course_machinery():
    """Importing every module of qkv in a fresh interpreter leaves qkv_exercises, qkv_grading and qkv_book unloaded."""
    program = ("import importlib, pkgutil, sys, qkv\n"
               "for m in pkgutil.walk_packages(qkv.__path__, 'qkv.'):\n"
               "    importlib.import_module(m.name)\n"
               "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
               f"{MACHINERY!r})))\n")
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "", f"importing qkv loaded: {run.stdout.strip()}"


def test_each_slips_module_sits_beside_its_problem_set():
    """A ``<name>_slips.py`` belongs to the problem set ``<name>``, and is never taken for a problem set."""
    slips_files = sorted(path.stem for path in PROBLEM_SETS.glob(f"*{SLIPS_SUFFIX}.py"))
    assert slips_files, "no problem set has slips of its own: the layout this test checks is gone"
    orphans = [stem for stem in slips_files if stem.removesuffix(SLIPS_SUFFIX) not in names()]
    assert not orphans, f"slips modules with no problem set beside them: {orphans}"
    assert not [name for name in names() if name.endswith(SLIPS_SUFFIX)]


def test_a_problem_sets_slips_import_only_qkv_and_the_shared_slips():
    """A set's slips module imports no check, expectation or problem set (they import it), so no cycle forms."""
    found = []
    for path in sorted(PROBLEM_SETS.glob(f"*{SLIPS_SUFFIX}.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level and (node.level, node.module) != (2, "slips"):
                found.append(f"{path.name}: {'.' * node.level}{node.module or ''}")
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module.split(".")[0] != "qkv" \
                    and node.module != "__future__" and node.module.split(".")[0] not in sys.stdlib_module_names:
                found.append(f"{path.name}: {node.module}")
    assert not found, f"slips modules importing more than qkv and qkv_exercises.slips: {found}"
