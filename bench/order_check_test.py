#!/usr/bin/env python3
"""Tests of bench/order_check.py on made-up orders (standard library only)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import order_check  # noqa: E402


def write_order(folder, name, plans):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name + ".json"), "w") as f:
        json.dump({"graph": name, "plans": [{"description": d, "estimated_cost": c}
                                            for d, c in plans]}, f)


class OrderCheckTest(unittest.TestCase):
    def test_places_and_the_baseline_alias(self):
        order = ["[Y] baseline (library matmuls)", "[Y] rows b1 v4", "[Y] library algo 1"]
        self.assertEqual(order_check.place(order, "[Y] rows b1 v4"), 2)
        self.assertEqual(order_check.place(order, "[Y] baseline"), 1)
        self.assertIsNone(order_check.place(order, "[Y] rows b64 v4"))

    def test_command_line_fails_when_a_winner_leaves_the_budget(self):
        with tempfile.TemporaryDirectory() as d:
            new, old = os.path.join(d, "new"), os.path.join(d, "old")
            write_order(old, "g1", [("base", 3e-6), ("win", 1e-6), ("other", 2e-6)])
            write_order(new, "g1", [("base", 3e-6), ("other", 1e-6), ("win", 2e-6)])
            write_order(old, "g2", [("base", 9e-6), ("w2", 4e-6)])
            write_order(new, "g2", [("base", 9e-6), ("w2", 4e-6)])
            winners = os.path.join(d, "w.json")
            with open(winners, "w") as f:
                json.dump({"_about": "x", "g1": [{"description": "win", "yirage_us": 2.0}],
                           "g2": [{"description": "w2", "yirage_us": 8.0}]}, f)
            run = lambda budget: subprocess.run(
                [sys.executable, order_check.__file__, "--winners", winners, "--budget",
                 str(budget), "--before", old, new], capture_output=True, text=True)
            tight = run(2)
            self.assertEqual(tight.returncode, 1, tight.stdout + tight.stderr)
            self.assertIn("1 of 2 newest winners within the first 2", tight.stdout)
            self.assertIn("1 of 2 graphs change their first 2", tight.stdout)
            # Measured 2 us against 2 us, 8 us against 4 us: ratios 1 and 2.
            self.assertIn("geometric mean 1.41", tight.stdout)
            # A winner moved out on purpose, saying why, does not fail it.
            with open(winners, "w") as f:
                json.dump({"g1": [{"description": "win", "moved_out": "a bet"}],
                           "g2": [{"description": "w2"}]}, f)
            excused = run(2)
            self.assertEqual(excused.returncode, 0, excused.stdout + excused.stderr)
            self.assertIn("moved out on purpose: g1: a bet", excused.stdout)
            with open(winners, "w") as f:
                json.dump({"_about": "x", "g1": [{"description": "win", "yirage_us": 2.0}],
                           "g2": [{"description": "w2", "yirage_us": 8.0}]}, f)
            loose = run(3)
            self.assertEqual(loose.returncode, 0, loose.stdout + loose.stderr)
            self.assertIn("2 of 2 newest winners within the first 3", loose.stdout)


if __name__ == "__main__":
    unittest.main()
