"""Running the pipeline: `tritonrl run` (the numbered notebooks with papermill), the step records that
say whether a step's work is current, the progress shown in the terminal, and `notebook.start`."""
