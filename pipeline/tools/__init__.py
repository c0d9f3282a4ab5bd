"""Tools the model can call: memory, knowledge and workspace file tools."""
