"""``biasscope dynamics``: fairness across training checkpoints, in the order it runs.

- ``scoring/``: which checkpoints, and each (checkpoint, probe, seed) unit scored into
  ``records/`` (`scoring.sweep.sweep`, `run_dynamics`), where the units run (executors), run.json
  and the checkpoints' fingerprints (weights, tokenizer and config files);
- ``analysis/``: the statistics over stored records (gap tests, emergence, breakdowns,
  performance against fairness, wordings, occupations) and their settings;
- ``summary/``: summary.json from the records, one pass over the run, and the report rendered
  from it (`summary.write.write_dynamics_report`);
- ``live/``: the same measurement during training (`evaluate_now`, `BiasCallback`);
- ``job.py``: the command as one call, `job.run(DynamicsConfig(...))`;
- ``settings.py``: that config and its parts alone, which the command's flags are built from.
"""
