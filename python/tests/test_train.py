"""mixprec.train(): the trainer in this process, with a progress callback."""

import json
import pathlib
import tempfile
import threading
import unittest

import mixprec
from support import SOURCE_DIR, cli_error

TINY = str(SOURCE_DIR / "configs" / "tiny.toml")


class Train(unittest.TestCase):
    def test_run_with_callback(self):
        seen = []
        with tempfile.TemporaryDirectory() as d:
            out = mixprec.train(TINY, ["model.n_layers=1", "training.eval_every=2",
                                       "metrics.log_every=2"],
                                run_dir=d, steps=4, progress="quiet", callback=seen.append)
            self.assertEqual(out["end_step"], 4)
            self.assertEqual([m["step"] for m in out["steps"]], [1, 2, 3, 4])
            self.assertEqual(out["final"]["step"], 4)
            self.assertGreater(out["final"]["loss"], 0)
            self.assertEqual(out["run_dir"], d)
            self.assertEqual([m["type"] for m in seen], ["train", "train", "eval", "train",
                                                         "train", "eval"])
            self.assertEqual(out["final_eval"]["step"], 4)
            # the numerics monitor's figures, per parameter on log steps
            numerics = out["final"]["numerics"]
            self.assertEqual(numerics["loss_scale"], 1.0)
            self.assertIn("underflow_fraction", numerics)
            self.assertTrue(any(p["name"] == "tok_emb.weight" for p in numerics["params"]))
            # the callback's dicts are the lines of metrics.jsonl
            lines = [json.loads(x) for x in
                     (pathlib.Path(d) / "metrics.jsonl").read_text().splitlines()]
            self.assertEqual([x for x in lines if x["type"] != "run"], seen)

    def test_callback_exception_stops_the_run(self):
        class Stop(Exception):
            pass

        def cb(m):
            if m.get("step") == 2:
                raise Stop("enough")

        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(Stop):
                mixprec.train(TINY, ["model.n_layers=1"], run_dir=d, steps=5, progress="quiet",
                              callback=cb)

    def test_gil_released(self):
        ticks = []
        stop = threading.Event()

        def tick():
            while not stop.is_set():
                ticks.append(1)
                stop.wait(0.005)

        th = threading.Thread(target=tick)
        th.start()
        with tempfile.TemporaryDirectory() as d:
            mixprec.train(TINY, ["model.n_layers=1"], run_dir=d, steps=3, progress="quiet")
        stop.set()
        th.join()
        self.assertGreater(len(ticks), 5)

    def test_bad_override_is_the_cli_message(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(mixprec.Error) as e:
                mixprec.train(TINY, ["training.stepz=3"], run_dir=d, progress="quiet")
            self.assertIn("stepz", str(e.exception))
            expected = cli_error("train", TINY, "--set", "training.stepz=3", "--run-dir", d)
            if expected is not None:
                self.assertEqual(str(e.exception), expected)

    def test_config_toml(self):
        text = mixprec.config_toml(TINY, ["training.steps=7"])
        self.assertIn("steps = 7", text)


if __name__ == "__main__":
    unittest.main()
