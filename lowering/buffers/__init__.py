"""The buffers level of tessc's lowering: see README.md in this folder."""
