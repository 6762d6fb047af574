"""The package's import structure stays as issues 20 and 32 left it: no import circles
between modules (imports inside functions count too: a circle dodged by a local import is
still a circle), no module imports another module's private (`_`-prefixed) names, every
module lives in its stage's folder (the folder tree is the map), and argparse stays in
cli/. Read from the source with `ast`, so nothing is imported."""
import ast
import os

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "nmtfrag")
# the compiled extension is the private half of phrases.py/symmetrize.py by design
PRIVATE_MODULES_ALLOWED = {"nmtfrag.fragment._phrases_fast"}


def _modules():
    """{dotted module name: path} of every .py file of the package."""
    found = {}
    for d, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(d, f), os.path.dirname(ROOT))
                name = rel[:-3].replace(os.sep, ".")
                found[name.removesuffix(".__init__")] = os.path.join(d, f)
    return found


def _imports(name, path, modules):
    """(imported module, imported names) for every import in the file, wherever it is."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                up = parts[: len(parts) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            names = [a.name for a in node.names]
            if not base.startswith("nmtfrag"):
                continue
            # `from . import x` imports the module nmtfrag.x, not a name
            subs = [f"{base}.{n}" for n in names if f"{base}.{n}" in modules]
            if subs:
                for s in subs:
                    yield s, []
            else:
                yield base, names


def _graph():
    modules = _modules()
    edges, private = {m: set() for m in modules}, []
    for name, path in modules.items():
        for target, names in _imports(name, path, modules):
            if target not in modules or target == name:
                continue
            if target.rpartition(".")[2].startswith("_") and \
                    not target.endswith("__init__") and target not in PRIVATE_MODULES_ALLOWED:
                private.append(f"{name} imports the private module {target}")
            private += [f"{name} imports {target}.{n}" for n in names
                        if n.startswith("_") and not n.startswith("__")]
            if not name.startswith(target + "."):  # a package's own __init__ is not a circle
                edges[name].add(target)
    return edges, private


def _circles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    edges, _ = _graph()
    assert sum(map(len, edges.values())) > 100  # the reader finds the package's imports
    assert _circles(edges) == []


def test_no_module_imports_private_names_of_another():
    _, private = _graph()
    assert private == []


# the stages, in pipeline order, and the shared core at the top (issue 32)
STAGES = {"data", "fragment", "train", "dp", "translate", "audit", "study", "cli"}
CORE = {"nmtfrag", "nmtfrag.__main__", "nmtfrag.errors", "nmtfrag.fileio",
        "nmtfrag.workdir", "nmtfrag.outdir", "nmtfrag.outlock", "nmtfrag.randomness",
        "nmtfrag.model_dir", "nmtfrag.quiet", "nmtfrag.limits", "nmtfrag.resume_clock"}
# argparse outside cli/, each with its reason
ARGPARSE_ALLOWED = {
    "nmtfrag.train.fairseq_args": "reads the options fairseq's architectures register with "
                              "argparse (the checkpoint decides them)",
}


def test_every_module_lives_in_its_stage_folder():
    stray = [m for m in _modules() if m not in CORE and m.split(".")[1] not in STAGES]
    assert stray == []


def _uses_argparse(path):
    tree = ast.parse(open(path, encoding="utf-8").read())
    return any(isinstance(n, ast.Import) and any(a.name == "argparse" for a in n.names)
               or isinstance(n, ast.ImportFrom) and n.module == "argparse"
               for n in ast.walk(tree))


def test_argparse_only_in_cli():
    found = {m for m, p in _modules().items()
             if not m.startswith("nmtfrag.cli") and _uses_argparse(p)}
    assert found == set(ARGPARSE_ALLOWED)
    assert _uses_argparse(_modules()["nmtfrag.cli"])  # the reader sees it where it is


def test_the_checks_can_fail():
    """The same readers flag a circle and a private import when there is one."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(edges) == [["a", "b", "c"]]
    tree = {"nmtfrag.x": "from .y import _hidden\n", "nmtfrag.y": "import nmtfrag.x\n"}
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        paths = {}
        for name, text in tree.items():
            paths[name] = os.path.join(d, name.split(".")[1] + ".py")
            with open(paths[name], "w") as f:
                f.write(text)
        got = {n: list(_imports(n, p, paths)) for n, p in paths.items()}
    assert got["nmtfrag.x"] == [("nmtfrag.y", ["_hidden"])]
    assert got["nmtfrag.y"] == [("nmtfrag.x", [])]
