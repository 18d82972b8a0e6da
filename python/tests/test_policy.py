"""Precision policies from Python."""

import unittest

import mixprec


class Policies(unittest.TestCase):
    def test_preset(self):
        p = mixprec.parse_policy("bf16-mixed")
        self.assertEqual(p.name, "bf16-mixed")
        self.assertEqual((p.param_dtype, p.compute_dtype, p.reduce_dtype, p.output_dtype),
                         ("bf16", "bf16", "f32", "f32"))
        self.assertEqual(p.master_dtype, "f32")
        self.assertTrue(p.f32_master)
        self.assertFalse(p.loss_scaling)
        self.assertIsNone(p.linear_recipe)
        self.assertEqual(p.matmul_precision, "highest")
        self.assertEqual(p.autocast_ops, "mixprec")
        self.assertTrue(str(p).startswith("param=bf16,compute=bf16,reduce=f32,"))
        self.assertEqual(mixprec.parse_policy(str(p)), p)
        self.assertEqual(p.as_dict()["compute"], "bf16")
        self.assertIn("bf16-mixed", repr(p))

    def test_other_spellings(self):
        self.assertTrue(mixprec.parse_policy("fp16-mixed").loss_scaling)
        self.assertEqual(mixprec.parse_policy("mixed_bfloat16"), mixprec.parse_policy("bf16-mixed"))
        jmp = mixprec.parse_policy("params=float32,compute=bfloat16,output=float32")
        self.assertEqual(jmp.compute_dtype, "bf16")
        pure = mixprec.parse_policy("bf16-pure")
        self.assertEqual((pure.master_dtype, pure.master_update), ("bf16", "stochastic"))
        self.assertIn("bf16-mixed", mixprec.preset_names())

    def test_recipe(self):
        p = mixprec.parse_policy("rowwise")
        self.assertEqual(p.linear_recipe, "rowwise")
        self.assertIn("lm_head", p.linear_skip)

    def test_bad_policy(self):
        with self.assertRaises(mixprec.Error) as e:
            mixprec.parse_policy("bf17-mixed")
        self.assertIsInstance(e.exception, ValueError)
        self.assertIn("bf17-mixed", str(e.exception))


if __name__ == "__main__":
    unittest.main()
