"""How programs are stored: one item per program (``PROG#{program}`` / ``PROG``,
see :func:`.codec.program_to_item`) and one row per program in the
``PROGRAMS`` partition, which lists them."""

from __future__ import annotations

from typing import cast

from tallybook.domain.model import Program
from tallybook.errors import DamagedItem
from tallybook.store import keys
from tallybook.store.port import ITEM_ABSENT, Compare, Item, ItemStore, Put
from tallybook.store.records.codec import program_from_item, program_problem, program_to_item


def _item(program: Program) -> Item:
    return {**keys.program(program.id).as_item(), **program_to_item(program)}


def program_create(program: Program) -> list[Put]:
    """The program and its listing row, on condition neither exists."""
    listing: Item = {**keys.program_directory(program.id).as_item(), "id": program.id}
    return [Put(_item(program), ITEM_ABSENT), Put(listing, ITEM_ABSENT)]


def program_replace(program: Program) -> Put:
    """The program as changed (same id, on condition it was not deleted and made again)."""
    item = _item(program)
    return Put(item, Compare("created_at", "=", item["created_at"]))


def read_program(store: ItemStore, program_id: str) -> Program | None:
    """The program, None if it does not exist, or :class:`DamagedItem` naming the
    item and what is wrong with it if it does not read."""
    key = keys.program(program_id)
    item = store.get(key)
    if item is None:
        return None
    problem = program_problem(item)
    if problem is not None:
        raise DamagedItem(
            f"program {program_id}: its stored item {key.pk} / {key.sk} is damaged: {problem}"
        )
    return program_from_item(item)


def program_ids(store: ItemStore) -> list[str]:
    return [cast(str, item["id"]) for item in store.query_all(keys.PROGRAMS_PARTITION)]
