"""The evaluators are plain functions: their parameters are the ones written in their `def`, no module of
cleanrl_utils rewrites a signature, and every call in an algorithm file binds each argument to the parameter it
names (the scripts pass them by position, `epsilon` before `capture_video` in the epsilon-greedy ones)."""

import ast
import importlib
import inspect
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast  # the edit-test loop's tier: pytest -m fast (docs/community/contribution.md)

REPO = Path(__file__).resolve().parents[2]
FAMILIES = ("discrete", "continuous", "atari", "jax", "special")
COMMON = ["model_path", "make_env", "env_id", "eval_episodes", "run_name", "Model", "device"]


def evaluators() -> dict[str, object]:
    """Every `evaluate_*` function of the family modules, as `family.name`."""
    found = {}
    for family in FAMILIES:
        module = importlib.import_module(f"cleanrl_utils.runtime.evals.{family}")
        found |= {f"{family}.{name}": fn for name, fn in vars(module).items() if name.startswith("evaluate_")}
    return found


def rewrites(tree: ast.AST) -> list[str]:
    """Lines of `tree` that set `__signature__` or delete `__wrapped__` (directly or through setattr/delattr)."""
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else []
        if isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for target in targets:
            wrong = "__wrapped__" if isinstance(node, ast.Delete) else "__signature__"
            if isinstance(target, ast.Attribute) and target.attr == wrong:
                found.append(f"line {node.lineno}: {wrong}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 2:
            name = node.args[1]
            wrong = {"setattr": "__signature__", "delattr": "__wrapped__"}.get(node.func.id)
            if wrong and isinstance(name, ast.Constant) and name.value == wrong:
                found.append(f"line {node.lineno}: {node.func.id} {wrong}")
    return found


def test_the_rewrite_finder_finds_rewrites():
    code = "f.__signature__ = s\ndel f.__wrapped__\nsetattr(f, '__signature__', s)\ndelattr(f, '__wrapped__')\nx = f.__signature__"
    assert len(rewrites(ast.parse(code))) == 4


def test_no_cleanrl_utils_module_rewrites_a_signature():
    offenders = {
        path.relative_to(REPO).as_posix(): found
        for path in sorted((REPO / "cleanrl_utils").rglob("*.py"))
        if (found := rewrites(ast.parse(path.read_text())))
    }
    assert not offenders, offenders


def test_each_evaluator_is_a_plain_function_common_parameters_first():
    found = evaluators()
    assert len(found) >= 20, sorted(found)
    for name, fn in found.items():
        code = fn.__code__
        written = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
        assert inspect.isfunction(fn) and not hasattr(fn, "__wrapped__"), name
        assert list(inspect.signature(fn).parameters) == written, f"{name}'s signature is not the one its def writes"
        assert fn.__doc__ and fn.__module__ == f"cleanrl_utils.runtime.evals.{name.split('.')[0]}", name
        positional = written[: code.co_argcount]
        assert positional[:7] == COMMON, (name, positional)
        assert positional[7:] in (["capture_video", "seed"], ["epsilon", "capture_video", "seed"]), (name, positional)


# what an argument of a call in an algorithm file is, by its source text, and the parameter it must land in
MEANT = {"args.capture_video": "capture_video", "args.end_e": "epsilon", "device": "device", "args.seed": "seed"}


def evaluator_calls() -> list[tuple[str, int, str, ast.Call, dict[str, ast.expr]]]:
    """(script, line, `family.evaluate_x`, the call, the script's `name = value` assignments) for every evaluator
    call in cleanrl/, found by the name the script imports it under."""
    calls = []
    for path in sorted((REPO / "cleanrl").rglob("*.py")):
        tree = ast.parse(path.read_text())
        imported = {
            alias.asname or alias.name: f"{node.module.rsplit('.', 1)[1]}.{alias.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cleanrl_utils.runtime.evals.")
            for alias in node.names
            if alias.name.startswith("evaluate_")
        }
        assigned = {
            node.targets[0].id: node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in imported:
                calls.append((path.relative_to(REPO).as_posix(), node.lineno, imported[node.func.id], node, assigned))
    return calls


def test_every_evaluator_call_binds_its_arguments_where_they_belong():
    found, calls = evaluators(), evaluator_calls()
    checked = 0
    for script, line, name, call, assigned in calls:
        args, kwargs = [], {}
        for arg in call.args:  # `*eval_args`: the tuple the script assigned to that name
            unpacked = isinstance(arg, ast.Starred) and assigned[ast.unparse(arg.value)]
            args += [ast.unparse(a) for a in unpacked.elts] if unpacked else [ast.unparse(arg)]
        for keyword in call.keywords:  # `**options`: the dict the script assigned to that name
            if keyword.arg is None:
                options = assigned[ast.unparse(keyword.value)]
                kwargs |= {k.value: ast.unparse(v) for k, v in zip(options.keys, options.values)}
            else:
                kwargs[keyword.arg] = ast.unparse(keyword.value)
        try:
            bound = inspect.signature(found[name]).bind(*args, **kwargs).arguments
        except TypeError as e:
            pytest.fail(f"{script}:{line}: {name} cannot take these arguments: {e}")
        landed = {source: parameter for parameter, source in bound.items() if source in MEANT}
        assert all(MEANT[source] == parameter for source, parameter in landed.items()), (script, line, landed)
        assert bound["model_path"].endswith("model_path") and bound["eval_episodes"] == "10", (script, line, bound)
        checked += 1
    assert checked == len(calls) >= 29, f"{checked} of {len(calls)} calls checked"
