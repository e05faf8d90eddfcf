#!/usr/bin/env python3
"""Tests of bench/rank_quality.py on made-up jobs (standard library only)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rank_quality  # noqa: E402


def row(cid, est, us, status="VERIFIED", **extra):
    r = {"candidate_id": cid, "estimated_cost": est, "time_us": us, "status": status,
         "description": f"plan {cid}"}
    r.update(extra)
    return r


class RankQualityTest(unittest.TestCase):
    def test_regret_rank_and_correlation(self):
        doc = {"job_id": "j", "candidates": [
            row(1, 0, 100, baseline=True),
            row(2, 1, 40), row(3, 2, 30), row(4, 3, 20),  # the fastest is third
            row(5, 4, 25), row(6, 5, 0, status="MISMATCH"),
            row(7, 0, 10, final_of=4), row(8, 0, 5, confirms=4),  # not search rows
        ]}
        q = rank_quality.job_quality(doc, [1, 2, 3])
        self.assertEqual(q["rows"], 5)
        self.assertEqual(q["verified"], 4)
        self.assertEqual(q["best_rank"], 3)
        self.assertAlmostEqual(q["regret@1"], 2.0)
        self.assertAlmostEqual(q["regret@2"], 1.5)
        self.assertAlmostEqual(q["regret@3"], 1.0)
        # Estimates 1..4 against times 40, 30, 20, 25: ranks 1234 vs 4312.
        self.assertAlmostEqual(q["spearman"], -0.8)

    def test_unevaluated_rows_are_counted_and_ties_share_ranks(self):
        doc = {"candidates": [row(1, 0, 100, baseline=True), row(2, 5, 10), row(3, 5, 10),
                              row(4, 1, 20), row(5, 9, 0, status="SKIPPED")]}
        q = rank_quality.job_quality(doc, [8])
        self.assertEqual(q["unevaluated"], 1)
        self.assertEqual(q["best_rank"], 1)
        self.assertEqual(rank_quality.ranks([5, 5, 1]), [2.5, 2.5, 1.0])

    def test_a_job_without_a_verified_row_is_left_out(self):
        self.assertIsNone(rank_quality.job_quality(
            {"candidates": [row(1, 0, 100, baseline=True), row(2, 1, 0, status="ERROR")]}, [8]))

    def test_replayed_order_ranks_by_its_places_and_counts_untimed_plans(self):
        doc = {"candidates": [row(1, 0, 100, baseline=True), row(2, 1, 40), row(3, 2, 30),
                              row(4, 3, 20), row(5, 4, 25)]}
        # The new order puts the fastest (plan 4) first, then a plan the job
        # never timed, then plans 2 and 5; plan 3 is not in it.
        order = [{"description": "base", "estimated_cost": 9},
                 {"description": "plan 4", "estimated_cost": 1},
                 {"description": "plan 99", "estimated_cost": 2},
                 {"description": "plan 2", "estimated_cost": 3},
                 {"description": "plan 5", "estimated_cost": 4}]
        q = rank_quality.job_quality(doc, [1, 2, 3], order)
        self.assertEqual(q["best_rank"], 1)
        self.assertAlmostEqual(q["regret@1"], 1.0)
        self.assertEqual(q["new@1"], 0)
        self.assertEqual(q["new@2"], 1)
        # Plan 3 has no estimate in that order: left out of the correlation
        # and of the ratios. Estimates 1, 3, 4 against times 20, 40, 25.
        self.assertAlmostEqual(q["spearman"], 0.5)
        self.assertEqual(len(q["ratios"]), 3)
        # Without an order: the job's own order.
        self.assertEqual(rank_quality.job_quality(doc, [1])["best_rank"], 3)

    def test_command_line_reads_a_folder(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "case_a.json"), "w") as f:
                json.dump({"candidates": [row(1, 0, 100, baseline=True), row(2, 1, 50)]}, f)
            with open(os.path.join(d, "broken.json"), "w") as f:
                f.write("{")
            out = subprocess.run([sys.executable, rank_quality.__file__, "--budgets", "1", d],
                                 capture_output=True, text=True, check=True)
        self.assertIn("`case_a`", out.stdout)
        self.assertIn("budget 1: the best found in 1 of 1 jobs", out.stdout)
        self.assertIn("unreadable", out.stderr)


if __name__ == "__main__":
    unittest.main()
