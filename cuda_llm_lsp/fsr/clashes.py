"""A winner's helpers merged into its file without changing what the rest of the file means
(docs/design.md [launch], "Applying a winner").

A reply's `#define TILE 32` written above a kernel in a file that uses `TILE` elsewhere (its own
`#define TILE 16`, a host variable, another kernel's parameter) would silently change that code.
So every name a helper defines (`#define`s, also inside the new kernel; `__device__` /
`__global__` functions, constexpr / constant / device variables, types, enumerators) that the
file uses outside the replaced kernel is, in order:

- dropped when the file already has the same definition token for token (unconditional, above
  the new kernel, never `#undef`ed);
- else renamed (`TILE` -> `TILE_<kernel>`, a name neither the file nor the reply uses) in the
  helpers and the new kernel only, token by token (never in comments or strings);
- else, when a rename would change what the reply means, refused (`HelperClash`) naming the name,
  where the file uses it and why: the reply asks `#ifdef` of a macro the file defines, pastes or
  stringizes the name (`#`, `##`), uses a function-like macro other than by calling it, or uses a
  macro of the file whose body names it.

A reply has no host code to rename: it made the candidate a `compile_error` when it was cleaned,
and `apply.winner_text` checks again (`source.device_only`).
"""

from __future__ import annotations

from dataclasses import dataclass

from cuda_llm_lsp.source.names import (
    Definition,
    Names,
    Token,
    macro_arguments,
    pasted_names,
    pasted_params,
    read_names,
)

_MACROS = ("macro", "function_macro")
_WHAT = {
    "macro": "#define",
    "function_macro": "#define",
    "function": "function",
    "variable": "declaration",
    "type": "type",
}


class HelperClash(ValueError):
    """A helper's name that the file uses cannot be renamed safely (the message says why)."""


@dataclass(frozen=True)
class Merged:
    """The helpers and the kernel as written into the file."""

    helpers: str
    kernel: str
    renamed: tuple[tuple[str, str], ...] = ()  # (the reply's name, the name written)
    dropped: tuple[str, ...] = ()  # names whose identical definition the file already has


def merge_helpers(
    file_text: str,
    kernel_span: tuple[int, int],
    insert_at: int,
    helpers: str,
    kernel: str,
    kernel_name: str,
) -> Merged:
    """`helpers` (written at `insert_at` of `file_text`) and `kernel` (replacing `kernel_span`)
    with every clashing name dropped or renamed. Raises `HelperClash`."""
    file = read_names(file_text)
    k_start, k_end = kernel_span

    def outside(offset: int) -> bool:
        return not k_start <= offset < k_end

    file_tokens = [t for t in file.tokens if t.ident and outside(t.start)]
    file_defs = [d for d in file.definitions if outside(d.start)]
    file_undefs = {t.text for t in file.undefs if outside(t.start)}
    ours = read_names(_without_known_blocks(helpers, file, insert_at))
    theirs = read_names(kernel)
    defined = _reply_definitions(ours, theirs, kernel_name)
    from_helpers = {id(d) for d in ours.definitions}
    macros = [d for d in (*ours.definitions, *theirs.definitions) if d.kind in _MACROS]
    taken = {t.text for t in file.tokens if t.ident} | {
        t.text for t in (*ours.tokens, *theirs.tokens) if t.ident
    }
    renamed: dict[str, str] = {}
    dropped: set[str] = set()
    for name, definitions in defined.items():
        is_macro = any(d.kind in _MACROS for d in definitions)
        uses = [t for t in file_tokens if t.text == name and (is_macro or not t.member)]
        if not uses:
            continue
        same = [d for d in file_defs if d.name == name]
        in_helpers = all(id(d) in from_helpers for d in definitions)
        if in_helpers and _identical(definitions, same, insert_at, is_macro, file_undefs):
            dropped.add(name)
            continue
        reason = _unsafe(name, definitions, ours, theirs, file, file_defs, macros, defined)
        if reason is not None:
            first = definitions[0]
            raise HelperClash(
                f"the winner's {_WHAT[first.kind]} `{name}` clashes with `{name}` in the file "
                f"({_where(uses, file, file_defs)}) and cannot be renamed safely: {reason}"
            )
        renamed[name] = fresh = _fresh(name, kernel_name, taken)
        taken.add(fresh)
    # a definition of several names (`enum E { A, B }`) is dropped only as a whole
    for definition in ours.definitions:
        if definition.name in dropped:
            sharing = [d for d in ours.definitions if d.start == definition.start]
            if any(d.name not in dropped for d in sharing if d.name in defined):
                dropped.discard(definition.name)
                renamed[definition.name] = fresh = _fresh(definition.name, kernel_name, taken)
                taken.add(fresh)
    drops = sorted(
        {_with_blank_line(ours.text, d.start, d.end) for d in ours.definitions if d.name in dropped}
    )
    return Merged(
        helpers=_rewrite(ours, renamed, defined, drops).strip("\n"),
        kernel=_rewrite(theirs, renamed, defined, []),
        renamed=tuple(renamed.items()),
        dropped=tuple(sorted(dropped)),
    )


def _reply_definitions(ours: Names, theirs: Names, kernel_name: str) -> dict[str, list[Definition]]:
    """The names the reply defines for the file: the helpers' device-side definitions and the
    `#define`s anywhere (also inside the kernel: a macro outlives its function)."""
    found: dict[str, list[Definition]] = {}
    in_kernel = [d for d in theirs.definitions if d.kind in _MACROS]  # not the kernel's locals
    for definition in (*ours.definitions, *in_kernel):
        if definition.name not in (kernel_name, "") and definition.device:
            found.setdefault(definition.name, []).append(definition)
    return found


def _without_known_blocks(helpers: str, file: Names, insert_at: int) -> str:
    """The helpers without the `#if`/`#ifdef` blocks the file has token for token above the
    new kernel (a model repeating the file's `#ifndef TILE / #define TILE 16 / #endif`)."""
    known = {b.shape for b in file.blocks if b.end <= insert_at}
    ours = read_names(helpers)
    for block in reversed(ours.blocks):
        if block.shape in known:
            start, end = _with_blank_line(helpers, block.start, block.end)
            helpers = helpers[:start] + helpers[end:]
    return helpers


def _with_blank_line(text: str, start: int, end: int) -> tuple[int, int]:
    """A dropped definition's span with the blank line after it, where one is also before it."""
    if text[end : end + 1] == "\n" and (start == 0 or text[start - 1 : start] == "\n"):
        return start, end + 1
    return start, end


def _identical(
    definitions: list[Definition],
    same: list[Definition],
    insert_at: int,
    is_macro: bool,
    undefs: set[str],
) -> bool:
    """The file already has each of these definitions, unconditionally, above the new kernel
    (a function's overloads each; a macro only this one, never `#undef`ed)."""
    if any(d.conditional for d in definitions) or not same:
        return False
    if is_macro and (
        len(definitions) != 1
        or definitions[0].name in undefs
        or any(d.shape != definitions[0].shape for d in same)
    ):
        return False
    above = {d.shape for d in same if not d.conditional and d.end <= insert_at}
    return all(d.shape in above for d in definitions)


def _unsafe(
    name: str,
    definitions: list[Definition],
    ours: Names,
    theirs: Names,
    file: Names,
    file_defs: list[Definition],
    macros: list[Definition],
    defined: dict[str, list[Definition]],
) -> str | None:
    """Why renaming `name` in the reply would change what the reply means, or None."""
    tokens = (ours.tokens, theirs.tokens)
    file_macro = [d for d in file_defs if d.kind in _MACROS and d.name == name]
    if file_macro and any(t.tested and t.text == name for part in tokens for t in part):
        line = file.lines(file_macro[0].start)
        return (
            f"the reply asks whether `{name}` is defined (`#ifdef` / `defined`), which the "
            f"file's own `#define {name}` (line {line}) decides"
        )
    for macro in macros:
        if name in pasted_names(macro):
            return f"the reply's macro `{macro.name}` pastes or stringizes it (`#` / `##`)"
    callable_macros = {d.name: d for d in (*file_defs, *macros) if d.kind == "function_macro"}
    for part in tokens:
        for i, token in enumerate(part):
            target = callable_macros.get(token.text) if token.ident else None
            if target is None or not (pasting := pasted_params(target)):
                continue
            args = macro_arguments(part, i + 1) or []
            if any(t.text == name for p in pasting if p < len(args) for t in args[p]):
                return f"it is passed to `{target.name}`, which pastes or stringizes that argument"
    if any(d.kind == "function_macro" for d in definitions):
        skip = {t.start for part in (ours, theirs) for t in part.undefs}
        for part in tokens:
            for i, token in enumerate(part):
                if token.text != name or token.tested or token.start in skip:
                    continue
                if i + 1 >= len(part) or part[i + 1].text != "(":
                    return (
                        f"the function-like macro `{name}` is used other than by calling "
                        "it, which cannot be followed"
                    )
    via = _file_macros_naming(name, ours, theirs, file_defs, defined)
    if via is not None:
        return (
            f"the file's macro `{via.name}` (line {file.lines(via.start)}) names "
            f"`{name}`, and the new kernel uses `{via.name}`: renaming would change "
            f"what `{via.name}` means there"
        )
    return None


def _file_macros_naming(
    name: str,
    ours: Names,
    theirs: Names,
    file_defs: list[Definition],
    defined: dict[str, list[Definition]],
) -> Definition | None:
    """A macro of the file that the reply uses (directly or through another file macro) whose
    body names `name`: expanded in the new kernel, it meant the reply's `name`."""
    bodies: dict[str, list[Definition]] = {}
    for d in file_defs:
        if d.kind in _MACROS and d.name not in defined:
            bodies.setdefault(d.name, []).append(d)
    seen: set[str] = set()
    todo = [t.text for part in (ours.tokens, theirs.tokens) for t in part if t.text in bodies]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for macro in bodies[current]:
            named = {t for t in macro.body if t not in macro.params}
            if name in named:
                return macro
            todo.extend(n for n in named if n in bodies)
    return None


def _fresh(name: str, kernel_name: str, taken: set[str]) -> str:
    candidate = f"{name}_{kernel_name}"
    suffix = 2
    while candidate in taken:
        candidate = f"{name}_{kernel_name}_{suffix}"
        suffix += 1
    return candidate


def _where(uses: list[Token], file: Names, file_defs: list[Definition]) -> str:
    """Where the file uses a name: its first lines, each with the definition it is in."""
    places: list[str] = []
    for use in uses:
        inside = next(
            (d for d in file_defs if d.start <= use.start < d.end and d.kind != "variable"), None
        )
        place = f"line {file.lines(use.start)}"
        if inside is not None:
            place += (
                f" in #define {inside.name}"
                if inside.kind in _MACROS
                else (f" in {inside.name}()" if inside.kind == "function" else f" in {inside.name}")
            )
        if place not in places:
            places.append(place)
    more = f" and {len(places) - 3} more" if len(places) > 3 else ""
    return ", ".join(places[:3]) + more


def _rewrite(
    names: Names,
    renamed: dict[str, str],
    defined: dict[str, list[Definition]],
    drops: list[tuple[int, int]],
) -> str:
    """The text with `renamed` names replaced token by token (a function's or variable's name
    not after `.`, `->` or `scope::`; a macro's everywhere, as the preprocessor replaces it) and
    the `drops` spans removed."""
    text = names.text
    edits: list[tuple[int, int, str]] = [(start, end, "") for start, end in drops]
    for token in names.tokens:
        new = renamed.get(token.text) if token.ident else None
        if new is None or any(s <= token.start < e for s, e in drops):
            continue
        is_macro = any(d.kind in _MACROS for d in defined.get(token.text, ()))
        if token.member and not is_macro:
            continue
        edits.append((token.start, token.end, new))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text
