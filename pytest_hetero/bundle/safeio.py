"""Moved to :mod:`pytest_hetero.safeio` (the one reader of every file the gate reads from outside);
kept so imports of ``pytest_hetero.safeio`` keep working."""

from pytest_hetero.safeio import (
    MIB,
    Unreadable,
    file_kind,
    hash_fd,
    loads_bounded,
    open_in,
    printable_name,
    read_fd,
    read_local,
    read_regular,
    safe_relative,
)

__all__ = ["MIB", "Unreadable", "file_kind", "hash_fd", "loads_bounded", "open_in", "printable_name", "read_fd",
           "read_local", "read_regular", "safe_relative"]
