"""Exports of engines for serving: a Triton Inference Server model repository (``export_triton``)."""

from __future__ import annotations

from .triton import add_parser, cmd_export_triton, export_triton, triton_config

__all__ = ["add_parser", "cmd_export_triton", "export_triton", "triton_config"]
