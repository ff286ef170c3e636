"""The house (issue 25): the package root shows the pipeline's stages, each stage imports only from the stages
before it, and no module imports one that imports it back -- lazy imports inside functions and imports made only
for type checking included (a cycle "for typing only" is still a cycle a reader must follow)."""

from __future__ import annotations

import ast

from tests import REPO

SRC = REPO / "src" / "tfgpu"
#: The stages, earliest first (docs/dev/architecture.md says why this order): a module may import from its own
#: stage and from the stages before it, never from a later one.
STAGES = ("core", "kb", "facts", "backends", "judge", "plan", "verify", "build", "render", "tools", "api", "cli")


def _module_name(path):
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path, name, known):
    """The tfgpu modules ``path`` imports, at any depth of the file, TYPE_CHECKING blocks included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def import_graph():
    files = {_module_name(p): p for p in SRC.rglob("*.py")}
    return {name: _imports(path, name, set(files)) for name, path in files.items()}


def find_cycle(graph):
    """A cycle of modules (each importing the next, the last importing the first), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if node.startswith(nxt + "."):
                continue  # a module importing its own package's __init__ is not a cycle
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _stage(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def test_the_walker_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_walker_sees_lazy_and_typing_imports():
    graph = import_graph()
    assert "tfgpu.judge.containers" in graph["tfgpu.judge.verdict"]  # a lazy import inside a function
    assert "tfgpu.judge.findings" in graph["tfgpu.plan.model"]  # an import under TYPE_CHECKING


def test_no_module_imports_one_that_imports_it_back():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_no_stage_imports_a_later_stage():
    later = sorted(f"{m} -> {t}" for m, targets in import_graph().items() for t in targets
                   if _stage(m) and _stage(t) and STAGES.index(_stage(t)) > STAGES.index(_stage(m)))
    assert not later, "\n".join(later)


def test_the_package_root_holds_only_the_stages():
    """The root shows the pipeline: __init__, __main__ and one package per stage (plus the knowledge base's
    data, which the wheel carries as tfgpu/compat)."""
    root = sorted(p.name for p in SRC.iterdir() if p.name != "__pycache__")
    assert root == sorted(["__init__.py", "__main__.py", *STAGES])
    for stage in STAGES:
        init = SRC / stage / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc, f"{stage}/__init__.py says in one line what the stage is for"


def test_no_module_is_over_700_lines():
    """A module is one job a reader can hold: none is longer than 700 lines (issue 25)."""
    long = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 700}
    assert not long, long


def _long_functions(text: str, limit: int = 80) -> list[tuple[str, int]]:
    """(name, lines) of each function in ``text`` longer than ``limit`` lines, from its ``def`` to its last line."""
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(ast.parse(text))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno is not None
            and n.end_lineno - n.lineno + 1 > limit]


def test_the_function_length_check_sees_a_long_function():
    body = "".join(f"    x{i} = {i}\n" for i in range(85))
    assert _long_functions(f"def short():\n    pass\n\n\ndef long():\n{body}") == [("long", 86)]


def test_no_function_is_over_80_lines():
    """A function is one step a reader can follow: none is longer than 80 lines (issue 25)."""
    long = {f"{p.relative_to(SRC)}:{name}": n for p in SRC.rglob("*.py")
            for name, n in _long_functions(p.read_text(encoding="utf-8"))}
    assert not long, long
