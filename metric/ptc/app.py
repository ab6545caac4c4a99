"""Gradio widget for the PTC metric when this folder is pushed to a Hugging Face Space."""

from pathlib import Path

import evaluate
from evaluate.utils import launch_gradio_widget

# The module file itself: a Space's folder is not named after the metric (evaluate looks for <folder>.py).
module = evaluate.load(str(Path(__file__).parent / "ptc.py"))
launch_gradio_widget(module)
