"""Report building blocks both protocols use: markdown tables and number formats
(``tables``), figures drawn off-screen and saved as PNG (``figures``).

Above: MIRAGE's report (``harness.mirage.report``) and CUE's (``harness.cue.report``,
``harness.cue.figures``). Below: matplotlib (imported only when a figure is drawn).
"""
