"""Gradio widget for the PTC metric when this folder is pushed to a Hugging Face Space."""

from pathlib import Path

import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load(str(Path(__file__).parent))
launch_gradio_widget(module)
