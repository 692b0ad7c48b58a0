"""Writes the Python API page of the reference (python-api.md) from the package's sources.

The `specdec` package's public names (each module's ``__all__``, else its names without a leading
underscore), their signatures and docstrings, read with ``ast``: nothing is imported, so the page is
made without building the extension. The docs target runs it (CMakeLists.txt); by hand:

    python3 docs/python_api.py OUT.md
"""

from __future__ import annotations

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "specdec"
# Module order on the page: the core entries first, then by use.
MODULES = ["__init__", "drafters", "decoder", "transformers", "vllm", "conformance", "simulate", "theory/__init__",
           "theory/sd", "theory/sprinter", "theory/sv", "theory/mtad", "theory/tree", "theory/block"]


def module_name(rel: str) -> str:
    parts = ["specdec"] + [p for p in rel.split("/") if p != "__init__"]
    return ".".join(parts)


def exported(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return None


def signature(node) -> str:
    args = ast.unparse(node.args)
    ret = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"{node.name}({args}){ret}"


def text(doc: str | None) -> str:
    """A docstring as Markdown that Doxygen reads literally: RST's double backticks become code spans,
    and Doxygen's command characters are escaped."""
    if not doc:
        return "(no docstring)"
    out = doc.replace("``", "`")
    for ch in ("\\", "@", "<", ">", "#", "%"):
        out = out.replace(ch, "\\" + ch)
    lines = [line.rstrip() for line in out.splitlines()]
    # indented blocks (examples) as code blocks, fenced so that their characters stay as written
    body, code = [], False
    for line in lines:
        is_code = line.startswith("    ") and line.strip() != ""
        if is_code and not code:
            body.append("```")
            code = True
        elif not is_code and code and line.strip() != "":
            body.append("```")
            code = False
        body.append(line[4:].replace("\\", "") if is_code else line)
    if code:
        body.append("```")
    return "\n".join(body)


def entries(tree: ast.Module, names: list[str] | None):
    defs = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defs[node.name] = node
    order = names if names is not None else [n for n in defs if not n.startswith("_")]
    for name in order:
        if name in defs:
            yield defs[name]


def class_members(node: ast.ClassDef):
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and (not item.name.startswith("_") or item.name == "__init__"):
            if ast.get_docstring(item) or item.name == "__init__":
                yield item


def page() -> str:
    out = ["# Python API {#python_api}", "", "[TOC]", "",
           "The `specdec` Python package (python/specdec, docs/python.md has the guide): each module's public",
           "functions and classes with their signatures and docstrings, generated from the sources.", ""]
    for rel in MODULES:
        path = PACKAGE / f"{rel}.py"
        tree = ast.parse(path.read_text())
        name = module_name(rel)
        out += [f"## {name}", "", text(ast.get_docstring(tree)), ""]
        for node in entries(tree, exported(tree)):
            if isinstance(node, ast.ClassDef):
                out += [f"### {node.name}", "", f"`class {name}.{node.name}`", "", text(ast.get_docstring(node)), ""]
                for m in class_members(node):
                    out += [f"#### {node.name}.{m.name}", "", f"`{signature(m)}`", "", text(ast.get_docstring(m)), ""]
            else:
                out += [f"### {node.name}", "", f"`{name}.{signature(node)}`", "", text(ast.get_docstring(node)), ""]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 docs/python_api.py OUT.md")
    pathlib.Path(sys.argv[1]).write_text(page())
