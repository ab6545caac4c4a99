"""The configs' rows: each group's users in a seeded presentation order, cut into easy/medium/hard/full.

Paper preset: every config holds the same groups (a level larger than the group is left out) and level k
shows the first k users of the group's permutation, so easy ⊂ medium ⊂ hard ⊂ full. Large preset: each level
holds its own groups (found with its k users) and ``full`` all of them, every group with all its users.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa

from dataset_builder.perrecbench.config import Preset
from dataset_builder.perrecbench.schema import CONFIGS


def presentation_order(group_id: str, n_users: int, seed: int) -> list[int]:
    """The seeded permutation of a group's users (indices into its ``full`` users ordered by rating).

    >>> sorted(presentation_order("Books:B1", 5, 0))
    [0, 1, 2, 3, 4]
    """
    order = list(range(n_users))
    random.Random(f"{seed}:{group_id}").shuffle(order)
    return order


def level_rows(group: dict[str, Any], seed: int) -> dict[str, dict[str, Any]]:
    """The group's row for every config (paper preset): one seeded permutation of its users, each level its
    first k; ``full`` holds all of them, and a level larger than the group (``--group-size`` < 5) is left out.
    (The reference rule for one row; the build applies it to Arrow batches in :func:`level_tables`.)

    >>> g = {"group_id": "g", "users": [{"user_id": str(i)} for i in range(5)]}
    >>> rows = level_rows(g, 0)
    >>> [len(rows[c]["users"]) for c in ("easy", "medium", "hard", "full")]
    [2, 3, 4, 5]
    >>> rows["easy"]["users"] == rows["full"]["users"][:2]
    True
    """
    users = [group["users"][i] for i in presentation_order(group["group_id"], len(group["users"]), seed)]
    sizes = {name: len(users) if name == "full" else size for name, size in CONFIGS.items()}
    return {
        name: {**group, "level": name, "users": users[:k]} for name, k in sizes.items() if k <= len(users)
    }


def level_tables(table: pa.Table, seed: int, preset: Preset = "paper") -> dict[str, pa.Table]:
    """A table of stage rows by config, cut with Arrow ``take`` (histories never become Python objects);
    :func:`level_rows` for the paper preset. Configs with no row are left out.

    >>> users = [[{"user_id": str(i)} for i in range(5)]]
    >>> t = pa.table({"group_id": ["g"], "level": ["full"], "users": users})
    >>> [u["user_id"] for u in level_tables(t, 0)["easy"].column("users")[0].as_py()] == [
    ...     u["user_id"] for u in level_rows(t.to_pylist()[0], 0)["easy"]["users"]]
    True
    >>> users = [[{"user_id": str(i)} for i in range(k)] for k in (2, 3)]
    >>> t = pa.table({"group_id": ["g:easy-0", "g:medium-0"], "level": ["easy", "medium"], "users": users})
    >>> {name: rows.num_rows for name, rows in level_tables(t, 0, "large").items()}
    {'easy': 1, 'medium': 1, 'full': 2}
    """
    users = table.column("users").combine_chunks()
    offsets = users.offsets.to_numpy()
    lengths = np.diff(offsets)
    group_ids, levels = table.column("group_id").to_pylist(), table.column("level").to_pylist()
    orders = [presentation_order(gid, int(n), seed) for gid, n in zip(group_ids, lengths, strict=True)]
    out = {}
    for name, size in CONFIGS.items():
        if name == "full":
            keep = list(range(table.num_rows))
        elif preset == "paper":
            keep = [i for i, n in enumerate(lengths) if size <= n]
        else:
            keep = [i for i, level in enumerate(levels) if level == name]
        if not keep:
            continue
        counts = [size if preset == "paper" and name != "full" else int(lengths[i]) for i in keep]
        index = np.fromiter(
            (offsets[i] + j for i, k in zip(keep, counts, strict=True) for j in orders[i][:k]), dtype=np.int64
        )
        level_users = pa.ListArray.from_arrays(
            pa.array(np.concatenate([[0], np.cumsum(counts)]), pa.int32()), users.values.take(pa.array(index))
        )
        part = table.take(pa.array(keep, pa.int64())) if len(keep) < table.num_rows else table
        part = part.set_column(table.schema.get_field_index("level"), "level", pa.array([name] * len(keep)))
        out[name] = part.set_column(table.schema.get_field_index("users"), "users", level_users)
    return out
