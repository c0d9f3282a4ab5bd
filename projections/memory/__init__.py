"""Long-term memory: the contract, its backends, and the events they apply."""
