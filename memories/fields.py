"""``FloatVectorField``: pgvector's model field, with a faster and shorter text form for writes.

pgvector's ``Vector.to_text`` writes each float32 as the shortest repr of its float64 widening
(up to 17 digits, ~240 µs for 384 dimensions on the 2-core machine); nine significant digits are
exactly enough to give back the same float32, which is what ``vector`` stores. ``vector_literal``
builds that text in one C-level format call (~95 µs, a third shorter): storing 5,882 LoCoMo
vectors spends ~0.85 s less CPU, and every query vector the search sends is smaller too
(docs/adr/0044-vector-indexes-and-reembedding.md).

Bulk writes go further: ``binary_vectors`` and ``use_binary_vectors`` send vectors in pgvector's
binary form as server-side parameters (``retrieval.vectors.memory_vectors.store_vectors``), with no text at all.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any

import numpy as np
import psycopg
from pgvector import Vector
from pgvector.django import VectorField
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.types import TypeInfo


@lru_cache(maxsize=8)
def _template(dimension: int) -> str:
    return "[" + ",".join(["%.9g"] * dimension) + "]"


def vector_literal(vector: Any) -> str:
    """pgvector's text input for ``vector`` (an array, a list or a ``Vector``): float32, nine digits."""
    values = np.asarray(vector.to_numpy() if isinstance(vector, Vector) else vector, dtype=np.float32)
    if values.ndim != 1:
        raise ValueError("a vector has one dimension")
    return _template(len(values)) % tuple(values.tolist())


class FloatVectorField(VectorField):
    """``VectorField`` whose values are written with :func:`vector_literal`."""

    def get_prep_value(self, value: Any) -> str | None:
        if value is None or isinstance(value, str):
            return value
        return vector_literal(value)


class VectorBytes(bytes):
    """One vector in pgvector's binary input form (``vector_recv``): what :func:`binary_vectors` makes."""


def binary_vectors(vectors: Any) -> list[VectorBytes]:
    """Rows of a 2-D array in pgvector's binary form: a big-endian uint16 dimension, a zero
    uint16, then the float32 values big-endian. Postgres copies them in; the text form costs a
    formatted float per value here and a parsed one there, for every vector stored."""
    rows = np.ascontiguousarray(vectors, dtype=">f4")
    if rows.ndim != 2:
        raise ValueError("binary_vectors takes one vector per row")
    header = struct.pack(">HH", rows.shape[1], 0)
    return [VectorBytes(header + row.tobytes()) for row in rows]


def vectors_from_binary(blob: bytes, rows: int) -> np.ndarray:
    """``rows`` vectors of equal dimension in pgvector's binary form back to back (as
    ``string_agg(vector_send(vector), '')`` returns them), as a float32 array: the inverse of
    :func:`binary_vectors`."""
    if rows <= 0 or len(blob) % rows:
        raise ValueError(f"{len(blob)} bytes do not hold {rows} vectors of one dimension")
    raw = np.frombuffer(blob, dtype=np.uint8).reshape(rows, len(blob) // rows)
    return raw[:, 4:].copy().view(">f4").astype(np.float32)


def use_binary_vectors(cursor: psycopg.Cursor[Any]) -> None:
    """Let ``cursor`` send :class:`VectorBytes` (and lists of them) as ``vector`` (and ``vector[]``)
    parameters, in binary. The type's oid is read, and its dumper made, once per database connection."""
    connection = cursor.connection
    known = getattr(connection, "_memoryhub_vector_dumper", None)
    if known is None:
        info = TypeInfo.fetch(connection, "vector")
        if info is None:
            raise psycopg.ProgrammingError("the vector type (pgvector) is not installed in this database")
        known = (info, type("VectorBytesDumper", (_VectorBytesDumper,), {"oid": info.oid}))
        connection._memoryhub_vector_dumper = known  # type: ignore[attr-defined]
    info, dumper = known
    info.register(cursor)
    cursor.adapters.register_dumper(VectorBytes, dumper)


class _VectorBytesDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        return bytes(obj)
