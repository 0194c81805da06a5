"""The job's graph solved by connected pieces, one piece held at a time.

Ranks that no collective call joins (gloo's collectives are `user_annotation` ranges with no node
in the graph; ranks that share no call) make a job graph of disjoint pieces, and a piece's longest
path does not depend on the others. So each piece is built, solved and dropped in turn: a rank
whose calls have no node (`JobPart.meets`) is a piece alone as soon as its graph is built; the
other ranks are held until every rank's calls are known (a call's transfer is timed by every
rank that makes it), then joined piece by piece (`job.pieces`).

The job's path is the one the whole graph's solve picks: the longest, and among equals the one
whose last node comes first in networkx's order. The whole graph's order runs generation by
generation and, within one, places the pieces' nodes by the nodes of generation 0 they were
reached from (`longest.topological_order`): so a piece's candidate stands at (its generation, its
root's rank, the root's node in its rank), which orders the pieces' candidates as the whole graph
would without solving it. The what-if tables solve again only the piece an event or a rank is
in; the other pieces keep their lengths.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from htatui.analysis.core.options import NotedTable
from htatui.analysis.views.critical_path.job import JobPart, join_ranks, matched_calls, piece_calls, pieces
from htatui.analysis.views.critical_path.longest import Path
from htatui.analysis.views.critical_path.path import RankGraph, solve
from htatui.analysis.views.critical_path.whatif import own_paths, path_if_paced, rank_table, slower_than


@dataclass(frozen=True)
class Pieces:
    """A job solved by pieces: the piece the path is in (its graph and path), each part's rank
    (parts: the ranks with a window, in order), each piece's parts and longest path, which piece
    is the path's, and the matched calls a piece is joined at (`job.matched_calls`)."""

    graph: RankGraph
    path: Path
    ranks: tuple[int, ...]
    pieces: tuple[tuple[int, ...], ...]
    lengths: tuple[float, ...]
    chosen: int
    calls: pl.DataFrame
    own_paths: tuple[tuple[tuple[int, float], ...] | None, ...]
    """Per piece, where it is one rank with no meeting node: that rank's own path (its piece's
    length; none when it has no edge); None: the piece must be built to find its ranks' own paths."""

    def others_us(self, piece: int | None = None) -> float:
        """The longest path among the pieces other than `piece` (default: the path's); −inf when none."""
        skip = self.chosen if piece is None else piece
        return max((length for i, length in enumerate(self.lengths) if i != skip), default=-np.inf)


@dataclass(frozen=True)
class JobSolution:
    """The job's path (`table`) and how it was solved (None when it was not: no rank, a cycle)."""

    table: NotedTable
    pieces: Pieces | None = None

    @property
    def graph(self) -> RankGraph | None:
        """The graph of the piece the job's path is in."""
        return None if self.pieces is None else self.pieces.graph


Build = Callable[[int], "JobPart | None"]
"""A rank's part of the job (None when it has no window)."""


def piece_graph(parts: list[JobPart], members: list[int], calls: pl.DataFrame, heights: list[int]) -> RankGraph:
    """A piece's graph from its parts (emptied): a rank that meets no other is its own graph."""
    if len(parts) == 1 and not parts[0].meets:
        return parts.pop().graph
    return join_ranks(parts, piece_calls(calls, members, heights))


@dataclass
class _Candidate:
    piece: list[int]
    graph: RankGraph
    path: Path
    place: tuple[int, int, int]


class _Chooser:
    """Keeps the piece whose path the whole graph's solve would pick, among those offered."""

    def __init__(self, node_counts: list[int]) -> None:
        self.node_counts = node_counts
        self.best: _Candidate | None = None
        self.solved: list[tuple[list[int], float, tuple[tuple[int, float], ...] | None]] = []

    def offer(self, members: list[int], g: RankGraph, alone: bool = False) -> None:
        """Solve a piece, and keep it where it comes before the best so far; `alone`: it is the
        job's only piece (no need to place it: a job graph of millions of nodes saves an array)."""
        found = solve(g, placed=not alone)
        # One rank, no meeting: its own path (its edges, none collective) is the piece's path.
        own = None
        if len(members) == 1 and g.meetings == 0:
            own = ((int(g.window.events["rank"][0]), found.length),) if len(g.edges.src) else ()
        self.solved.append((members, found.length, own))
        place = standing(found, members, self.node_counts) if g.node_count and not alone else NOWHERE
        best = self.best
        if best is None or found.length > best.path.length or (found.length == best.path.length and place < best.place):
            self.best = _Candidate(members, g, found, place)


NOWHERE = (np.iinfo(np.int64).max, 0, 0)
"""Where a piece with no node stands: after every other (nothing of it is in the whole order)."""


def standing(found: Path, members: list[int], node_counts: list[int]) -> tuple[int, int, int]:
    """Where the last node of a piece's path (solved `placed`) stands in the whole graph's order:
    its generation, then its root's part and the root's node in that part (generation 0 is in
    node order: ranks in order, each rank's nodes in order). `members`: the piece's parts,
    ascending; `node_counts`: every part's nodes (a piece numbers its parts' nodes in turn)."""
    offsets = np.cumsum([0] + [node_counts[i] for i in members])
    at = int(np.searchsorted(offsets, found.root, side="right")) - 1
    return (found.generation, members[at], found.root - int(offsets[at]))


def solve_by_pieces(ranks: list[int], build: Build) -> Pieces | None:
    """The job's ranks built one at a time (`build`), solved by pieces (module docstring); None
    when no rank has a window. CycleError from a piece's solve is the job's."""
    calls: list[pl.DataFrame | None] = []
    heights: list[int] = []
    node_counts: list[int] = []
    kept: list[int] = []
    held: dict[int, JobPart] = {}
    chooser = _Chooser(node_counts)
    for rank in ranks:
        part = build(rank)
        if part is None:
            continue
        i = len(kept)
        kept.append(rank)
        calls.append(part.calls)
        heights.append(part.graph.window.events.height)
        node_counts.append(len(part.graph.nodes.ts))
        if part.meets:
            held[i] = part
        else:
            chooser.offer([i], piece_graph([part], [i], pl.DataFrame(), []))
        del part
    if not kept:
        return None
    matched = matched_calls(calls)
    joined = pieces(matched, sorted(held))
    alone = len(joined) == 1 and not chooser.solved
    for members in joined:
        parts = [held.pop(i) for i in members]
        chooser.offer(members, piece_graph(parts, members, matched, [heights[i] for i in members]), alone)
    best = chooser.best
    assert best is not None
    ordered = sorted(chooser.solved, key=lambda piece: piece[0])
    return Pieces(
        graph=best.graph,
        path=best.path,
        ranks=tuple(kept),
        pieces=tuple(tuple(members) for members, _, _ in ordered),
        lengths=tuple(length for _, length, _ in ordered),
        chosen=[members for members, _, _ in ordered].index(best.piece),
        calls=matched,
        own_paths=tuple(own for _, _, own in ordered),
    )


def rebuilt(solution: Pieces, build: Build, piece: int) -> RankGraph:
    """A piece's graph built again from its ranks (the straggler table goes through every piece)."""
    members = list(solution.pieces[piece])
    parts = []
    for i in members:
        part = build(solution.ranks[i])
        assert part is not None, "a rank with a window lost it"
        parts.append(part)
    heights = [part.graph.window.events.height for part in parts]
    return piece_graph(parts, members, solution.calls, heights)


def rank_what_if_by_pieces(solution: Pieces, build: Build) -> pl.DataFrame:
    """`whatif.rank_what_if` over a job of several pieces: each rank's own path from its piece,
    then the job's path with a slow rank paced: its piece solved again, the others as they were.
    A piece is built again for its ranks' own paths (unless it is one rank alone: its path) and
    again for its slow ranks (the median needs every rank's own path first)."""
    own: list[tuple[int, float, int]] = []
    for p, known in enumerate(solution.own_paths):
        if known is None:
            g = solution.graph if p == solution.chosen else rebuilt(solution, build, p)
            known = tuple(zip(*own_paths(g), strict=True))
            del g
        own += [(rank, length, p) for rank, length in known]
    own.sort()
    lengths = [length for _, length, _ in own]
    median = float(np.median(lengths)) if lengths else 0.0
    job_now = max(solution.lengths)
    after = [job_now] * len(own)
    for p in range(len(solution.pieces)):
        slow = [i for i, (_, length, q) in enumerate(own) if q == p and slower_than(length, median)]
        if not slow:
            continue
        g = solution.graph if p == solution.chosen else rebuilt(solution, build, p)
        others = solution.others_us(p)
        for i in slow:
            after[i] = max(others, path_if_paced(g, own[i][0], median, own[i][1]))
        del g
    return rank_table([rank for rank, _, _ in own], lengths, median, job_now, after)
