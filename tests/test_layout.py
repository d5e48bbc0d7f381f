"""The repo's shape: the top level is the design card and at most three shared modules, no module
at the top imports the trainer, no import cycles, no file reads another's source, no long
functions where a reader follows the code, each model file depends only on torch and opens with its
paper, and nothing refers to files a clone does not have."""
import ast
import glob
import os
import re

from conftest import ROOT

MODEL_FILES = ['parcae.py', 'textnca.py', 'fon.py', 'workspace.py', 'baselines.py']
DESIGN_CARD = MODEL_FILES + ['configurator.py', 'prepare_data.py', 'train.py', 'sample.py']
SHARED = ['models.py', 'battery.py', 'run_folder.py', 'data.py', 'pretrained.py']   # each named for what it holds
LONGEST = 80   # lines of a function in train.py, sample.py and tools/
# functions still over LONGEST, being split elsewhere; this set only ever shrinks (empty it once they are)
STDLIB_OK = {'math', 'dataclasses', 'typing', 'functools'}


def python_files():
    """Every Python file of the repo outside tests/, relative to ROOT."""
    files = glob.glob(os.path.join(ROOT, '*.py')) + glob.glob(os.path.join(ROOT, 'tools', '*.py'))
    return sorted(os.path.relpath(f, ROOT) for f in files)


def module_name(path):
    return path[:-3].replace(os.sep, '.').removesuffix('.__init__')


def imports_of(path):
    """The repo modules a file imports, anywhere in it (function bodies too)."""
    tree = ast.parse(open(os.path.join(ROOT, path)).read(), path)
    local = {module_name(p) for p in python_files()}
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f'{node.module}.{a.name}' for a in node.names]
        found |= {n for n in names if n in local}
    return found


def test_top_level_is_the_design_card():
    top = sorted(os.path.basename(f) for f in glob.glob(os.path.join(ROOT, '*.py')))
    assert len(top) <= 14, top
    assert set(DESIGN_CARD) <= set(top) and set(top) <= set(DESIGN_CARD + SHARED), top
    graph = {module_name(p): imports_of(p) for p in python_files()}
    top_modules = {module_name(f) for f in top}
    for mod in top_modules:   # nothing at the top depends on the analysis tools
        assert not {m for m in graph[mod] if m.startswith('tools')}, (mod, graph[mod])


def test_no_module_at_the_top_imports_the_trainer_and_there_is_no_cycle():
    # the tools and the tests may import train (its defaults, its optimizers); nothing train imports may
    graph = {module_name(p): imports_of(p) for p in python_files()}
    for test in glob.glob(os.path.join(ROOT, 'tests', '*.py')):
        graph['tests.' + os.path.basename(test)[:-3]] = imports_of(os.path.relpath(test, ROOT))
    assert not [m for m, deps in graph.items() if 'train' in deps and '.' not in m]
    state = {}

    def visit(m, path):
        if state.get(m) == 'done':
            return
        assert state.get(m) != 'open', f"import cycle: {' -> '.join(path + [m])}"
        state[m] = 'open'
        for dep in graph.get(m, ()):
            visit(dep, path + [m])
        state[m] = 'done'
    for m in graph:
        visit(m, [])


def test_no_file_reads_another_files_source():
    # plain imports and explicit lists: no syntax tree of another file, no module found by its name
    # as a string, no signature read to find a model's knobs
    banned_modules = {'importlib', 'inspect', 'runpy'}
    for path in python_files():
        tree = ast.parse(open(os.path.join(ROOT, path)).read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not {a.name.split('.')[0] for a in node.names} & banned_modules, (path, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                assert (node.module or '').split('.')[0] not in banned_modules, (path, node.lineno)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                assert (node.value.id, node.attr) not in {('ast', 'parse'), ('ast', 'walk')}, (path, node.lineno)


def test_functions_a_reader_follows_are_short():
    files = ['train.py', 'sample.py'] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, 'tools', '*.py')))
    long = set()
    for path in files:
        tree = ast.parse(open(os.path.join(ROOT, path)).read(), path)
        long |= {(path, n.name) for n in ast.walk(tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > LONGEST}
    assert not long, sorted(long)


def test_model_files_depend_on_torch_alone_and_open_with_their_paper():
    for f in MODEL_FILES:
        tree = ast.parse(open(os.path.join(ROOT, f)).read(), f)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                for n in names:
                    assert n.split('.')[0] in {'torch'} | STDLIB_OK, (f, n)
        doc = ast.get_docstring(tree)
        assert doc and len(doc.splitlines()) <= 42, (f, len(doc.splitlines()) if doc else None)
        if f != 'baselines.py':   # the baselines file cites each of its models where it defines them
            assert 'arXiv' in ' '.join(doc.splitlines()[:4]), f


def test_nothing_refers_outside_the_repo():
    # a relative path must land inside the clone, a capitalised document it names must be one of the repo's,
    # and no line cites the tracker a clone does not have
    paths = re.compile(r'(?:\.\./)+[\w.-]+')
    docs = re.compile(r'\b[A-Z][A-Z_]{2,}\.md\b')
    tracker = re.compile(r'\bissues? #?\d')
    have = {os.path.basename(p) for p in glob.glob(os.path.join(ROOT, '**', '*.md'), recursive=True)}
    files = [p for p in glob.glob(os.path.join(ROOT, '**', '*'), recursive=True)
             if os.path.isfile(p) and p.endswith(('.py', '.md')) and '/out' not in p and '/data/' not in p]
    bad = []
    for p in files:
        for k, line in enumerate(open(p, encoding='utf-8', errors='replace'), 1):
            outside = [m for m in paths.findall(line)
                       if not os.path.realpath(os.path.join(os.path.dirname(p), m)).startswith(ROOT + os.sep)]
            missing = [m for m in docs.findall(line) if m not in have]
            if outside or missing or tracker.search(line):
                bad.append(f'{os.path.relpath(p, ROOT)}:{k}: {line.strip()[:80]}')
    assert not bad, bad


def test_configs_chain_at_most_two_bases_deep():
    from configurator import parse_args   # reads the chain; depth counted here

    def depth(path):
        ns = {}
        exec(open(path).read(), ns)
        bases = ns.get('base', ())
        bases = (bases,) if isinstance(bases, str) else bases
        return 1 + max((depth(os.path.join(os.path.dirname(path), b)) for b in bases), default=0)
    files = glob.glob(os.path.join(ROOT, 'config', '**', '*.py'), recursive=True)
    assert files
    for f in files:
        parse_args([f])
        assert depth(f) <= 3, f   # the file itself plus at most two levels of base
