from tests.sim.test_demo_leaves_nothing import leftovers

__all__ = ["leftovers"]
