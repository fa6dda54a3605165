"""Placeholder: filled in by the family owner."""

from __future__ import annotations


class TensorMixin:
    pass
