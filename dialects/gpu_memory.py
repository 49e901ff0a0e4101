"""
`#gpu.address_space<...>`: the GPU memory spaces, which xDSL 0.74's `gpu` dialect lacks.

Upstream MLIR's `gpu` dialect names the memory a memref lives in with
`#gpu.address_space<global | workgroup | private>`; tessc's gpu level puts block-shared
scratch (reduction trees, matmul tiles) in `memref<... , #gpu.address_space<workgroup>>`,
the form upstream MLIR parses. xDSL 0.74 ships the `gpu` ops but not this attribute, so it
is defined here and loaded into every tessc context next to the `gpu` dialect (see
`tessc.context`); the rest of the `gpu` dialect is xDSL's own.
"""

from __future__ import annotations

from xdsl.dialects.builtin import MemRefType, StringAttr
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

ADDRESS_SPACES = ("global", "workgroup", "private")


@irdl_attr_definition
class AddressSpaceAttr(ParametrizedAttribute):
    """`#gpu.address_space<workgroup>`: a memref memory space (global, workgroup, private)."""

    name = "gpu.address_space"

    space: StringAttr

    def __init__(self, space: str):
        super().__init__(StringAttr(space))

    @property
    def value(self) -> str:
        return self.space.data

    def verify(self) -> None:
        if self.space.data not in ADDRESS_SPACES:
            raise VerifyException(
                f"#gpu.address_space takes one of {', '.join(ADDRESS_SPACES)}, got {self.space}"
            )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            space = parser.parse_identifier()
        return [StringAttr(space)]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.value}>")


WORKGROUP = AddressSpaceAttr("workgroup")


def is_workgroup(memref_type: Attribute) -> bool:
    """Whether `memref_type` is a memref in workgroup (block-shared) memory."""
    return isinstance(memref_type, MemRefType) and memref_type.memory_space == WORKGROUP


__all__ = ["ADDRESS_SPACES", "WORKGROUP", "AddressSpaceAttr", "is_workgroup"]
