#!/usr/bin/env python3
"""Lists which top-level modules of src/ import which, and reports import loops.

Usage: scripts/deps.py [--files]   (--files: one line per file-level edge inside a module too)
Reads `crate::a::b` paths (in `use` items and inline) and `super::` paths; comments are skipped.
"""
import os, re, sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

def module_of(rel):
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    return parts

def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(l.split("//")[0] if not l.lstrip().startswith("//") else "" for l in text.splitlines())

edges = {}
file_edges = {}
for root, _, files in os.walk(SRC):
    for f in files:
        if not f.endswith(".rs"):
            continue
        path = os.path.join(root, f)
        rel = os.path.relpath(path, SRC)
        mod = module_of(rel)
        if mod in (["lib"], ["main"]):
            continue
        text = strip_comments(open(path, encoding="utf-8").read())
        # Expand `use crate::{a, b::c}` groups.
        targets = set()
        for m in re.finditer(r"crate::\{([^;]*?)\};", text, flags=re.S):
            for item in re.split(r",", m.group(1)):
                item = item.strip()
                if item:
                    targets.add(tuple(re.split(r"::", item.split("{")[0].strip(": "))))
        for m in re.finditer(r"crate::([a-z_]+)(?:::([a-z_]+))?", text):
            targets.add((m.group(1),) + ((m.group(2),) if m.group(2) else ()))
        top = mod[0]
        for t in targets:
            if not t or not t[0]:
                continue
            if t[0] != top:
                edges.setdefault(top, set()).add(t[0])
            elif len(mod) > 1 and len(t) > 1 and t[1] != mod[1]:
                file_edges.setdefault(top, set()).add((mod[1], t[1]))
        if len(mod) > 1:
            for m in re.finditer(r"super::([a-z_]+)", text):
                if m.group(1) != mod[-1] and len(mod) == 2:
                    file_edges.setdefault(top, set()).add((mod[1], m.group(1)))

def cycles(graph):
    out = []
    def dfs(node, stack, seen):
        for n in sorted(graph.get(node, ())):
            if n in stack:
                cyc = stack[stack.index(n):] + [n]
                key = tuple(sorted(cyc[:-1]))
                if key not in seen:
                    seen.add(key)
                    out.append(cyc)
            else:
                dfs(n, stack + [n], seen)
    seen = set()
    for start in sorted(graph):
        dfs(start, [start], seen)
    return out

for m in sorted(edges):
    print(f"{m:9} -> {', '.join(sorted(edges[m]))}")
loops = cycles(edges)
inner = {}
for top, es in file_edges.items():
    g = {}
    for a, b in es:
        g.setdefault(a, set()).add(b)
    for c in cycles(g):
        loops.append([f"{top}/{x}" for x in c])
    if "--files" in sys.argv:
        for a, b in sorted(es):
            print(f"  {top}/{a} -> {top}/{b}")
print("loops:", "none" if not loops else "")
for c in loops:
    print("  " + " -> ".join(c))
sys.exit(1 if loops else 0)
