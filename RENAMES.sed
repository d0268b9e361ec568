# RENAMES.sed (issue 35 point 4): an old livebytes.validate import or path -> the new one.
# Apply with GNU sed: sed -i -f RENAMES.sed FILE...  Idempotent (a new path never matches an old rule).
# Sections run in order; inside a section the longest name comes first.
# 1. split `from livebytes.validate import a, b` (and `from ..validate import a, b`) into one import a line,
#    same indentation, so that each name can move to its own subpackage (check/ or gpu/).
:split
s#^\([ \t]*\)from \(livebytes\.\|\.\.\)validate import \([A-Za-z_][A-Za-z_0-9]*\( as [A-Za-z_][A-Za-z_0-9]*\)\?\), *\([A-Za-z_]\)#\1from \2validate import \3\n\1from \2validate import \5#M
t split
# 2. `from livebytes.validate import NAME` / `from ..validate import NAME`: the module's new subpackage.
s#from \(livebytes\.\|\.\.\)validate import allocator_traces\b#from \1validate.check import allocator_traces#g
s#from \(livebytes\.\|\.\.\)validate import record_figures\b#from \1validate.check import record_figures#g
s#from \(livebytes\.\|\.\.\)validate import traced_harness\b#from \1validate.gpu import traced_harness#g
s#from \(livebytes\.\|\.\.\)validate import model_records\b#from \1validate.check import model_records#g
s#from \(livebytes\.\|\.\.\)validate import probe_records\b#from \1validate.check import probe_records#g
s#from \(livebytes\.\|\.\.\)validate import process_check\b#from \1validate.check import process_check#g
s#from \(livebytes\.\|\.\.\)validate import record_misses\b#from \1validate.check import record_misses#g
s#from \(livebytes\.\|\.\.\)validate import probe_replay\b#from \1validate.check import probe_replay#g
s#from \(livebytes\.\|\.\.\)validate import store_traces\b#from \1validate.check import store_traces#g
s#from \(livebytes\.\|\.\.\)validate import triton_state\b#from \1validate.gpu import triton_state#g
s#from \(livebytes\.\|\.\.\)validate import environment\b#from \1validate.gpu import environment#g
s#from \(livebytes\.\|\.\.\)validate import runner_args\b#from \1validate.gpu import runner_args#g
s#from \(livebytes\.\|\.\.\)validate import cp_runner\b#from \1validate.gpu import cp_runner#g
s#from \(livebytes\.\|\.\.\)validate import harnesses\b#from \1validate.gpu import harnesses#g
s#from \(livebytes\.\|\.\.\)validate import autotune\b#from \1validate.gpu import autotune#g
s#from \(livebytes\.\|\.\.\)validate import boundary\b#from \1validate.gpu import boundary#g
s#from \(livebytes\.\|\.\.\)validate import gpu_lock\b#from \1validate.gpu import gpu_lock#g
s#from \(livebytes\.\|\.\.\)validate import protocol\b#from \1validate.check import protocol#g
s#from \(livebytes\.\|\.\.\)validate import compare\b#from \1validate.check import compare#g
s#from \(livebytes\.\|\.\.\)validate import explain\b#from \1validate.check import explain#g
s#from \(livebytes\.\|\.\.\)validate import figures\b#from \1validate.check import figures#g
s#from \(livebytes\.\|\.\.\)validate import history\b#from \1validate.check import history#g
s#from \(livebytes\.\|\.\.\)validate import payload\b#from \1validate.gpu import payload#g
s#from \(livebytes\.\|\.\.\)validate import records\b#from \1validate.check import records#g
s#from \(livebytes\.\|\.\.\)validate import session\b#from \1validate.gpu import session#g
s#from \(livebytes\.\|\.\.\)validate import frames\b#from \1validate.check import frames#g
s#from \(livebytes\.\|\.\.\)validate import inputs\b#from \1validate.gpu import inputs#g
s#from \(livebytes\.\|\.\.\)validate import runner\b#from \1validate.gpu import runner#g
s#from \(livebytes\.\|\.\.\)validate import batch\b#from \1validate.gpu import batch#g
s#from \(livebytes\.\|\.\.\)validate import trace\b#from \1validate.gpu import trace#g
s#from \(livebytes\.\|\.\.\)validate import oom\b#from \1validate.gpu import oom#g
# 3. dotted module paths: livebytes.validate.NAME, ..validate.NAME, `python -m livebytes.validate.NAME`, mock targets.
s#\bvalidate\.allocator_traces\b#validate.check.allocator_traces#g
s#\bvalidate\.record_figures\b#validate.check.record_figures#g
s#\bvalidate\.traced_harness\b#validate.gpu.traced_harness#g
s#\bvalidate\.model_records\b#validate.check.model_records#g
s#\bvalidate\.probe_records\b#validate.check.probe_records#g
s#\bvalidate\.process_check\b#validate.check.process_check#g
s#\bvalidate\.record_misses\b#validate.check.record_misses#g
s#\bvalidate\.probe_replay\b#validate.check.probe_replay#g
s#\bvalidate\.store_traces\b#validate.check.store_traces#g
s#\bvalidate\.triton_state\b#validate.gpu.triton_state#g
s#\bvalidate\.environment\b#validate.gpu.environment#g
s#\bvalidate\.runner_args\b#validate.gpu.runner_args#g
s#\bvalidate\.cp_runner\b#validate.gpu.cp_runner#g
s#\bvalidate\.harnesses\b#validate.gpu.harnesses#g
s#\bvalidate\.autotune\b#validate.gpu.autotune#g
s#\bvalidate\.boundary\b#validate.gpu.boundary#g
s#\bvalidate\.gpu_lock\b#validate.gpu.gpu_lock#g
s#\bvalidate\.protocol\b#validate.check.protocol#g
s#\bvalidate\.compare\b#validate.check.compare#g
s#\bvalidate\.explain\b#validate.check.explain#g
s#\bvalidate\.figures\b#validate.check.figures#g
s#\bvalidate\.history\b#validate.check.history#g
s#\bvalidate\.payload\b#validate.gpu.payload#g
s#\bvalidate\.records\b#validate.check.records#g
s#\bvalidate\.session\b#validate.gpu.session#g
s#\bvalidate\.frames\b#validate.check.frames#g
s#\bvalidate\.inputs\b#validate.gpu.inputs#g
s#\bvalidate\.runner\b#validate.gpu.runner#g
s#\bvalidate\.batch\b#validate.gpu.batch#g
s#\bvalidate\.trace\b#validate.gpu.trace#g
s#\bvalidate\.oom\b#validate.gpu.oom#g
# 4. the probes, once scripts (validate/probes/NAME.py), now modules of livebytes.validate.gpu.probes.
s#\bvalidate\.probes\b#validate.gpu.probes#g
s#\bvalidate/probes\b#validate/gpu/probes#g
# 5. module files by path: validate/NAME.py, validate/harnesses/.
s#\bvalidate/harnesses\b#validate/gpu/harnesses#g
s#\bvalidate/allocator_traces\.py\b#validate/check/allocator_traces.py#g
s#\bvalidate/record_figures\.py\b#validate/check/record_figures.py#g
s#\bvalidate/traced_harness\.py\b#validate/gpu/traced_harness.py#g
s#\bvalidate/model_records\.py\b#validate/check/model_records.py#g
s#\bvalidate/probe_records\.py\b#validate/check/probe_records.py#g
s#\bvalidate/process_check\.py\b#validate/check/process_check.py#g
s#\bvalidate/record_misses\.py\b#validate/check/record_misses.py#g
s#\bvalidate/probe_replay\.py\b#validate/check/probe_replay.py#g
s#\bvalidate/store_traces\.py\b#validate/check/store_traces.py#g
s#\bvalidate/triton_state\.py\b#validate/gpu/triton_state.py#g
s#\bvalidate/environment\.py\b#validate/gpu/environment.py#g
s#\bvalidate/runner_args\.py\b#validate/gpu/runner_args.py#g
s#\bvalidate/cp_runner\.py\b#validate/gpu/cp_runner.py#g
s#\bvalidate/autotune\.py\b#validate/gpu/autotune.py#g
s#\bvalidate/boundary\.py\b#validate/gpu/boundary.py#g
s#\bvalidate/gpu_lock\.py\b#validate/gpu/gpu_lock.py#g
s#\bvalidate/protocol\.py\b#validate/check/protocol.py#g
s#\bvalidate/compare\.py\b#validate/check/compare.py#g
s#\bvalidate/explain\.py\b#validate/check/explain.py#g
s#\bvalidate/figures\.py\b#validate/check/figures.py#g
s#\bvalidate/history\.py\b#validate/check/history.py#g
s#\bvalidate/payload\.py\b#validate/gpu/payload.py#g
s#\bvalidate/records\.py\b#validate/check/records.py#g
s#\bvalidate/session\.py\b#validate/gpu/session.py#g
s#\bvalidate/frames\.py\b#validate/check/frames.py#g
s#\bvalidate/inputs\.py\b#validate/gpu/inputs.py#g
s#\bvalidate/runner\.py\b#validate/gpu/runner.py#g
s#\bvalidate/batch\.py\b#validate/gpu/batch.py#g
s#\bvalidate/trace\.py\b#validate/gpu/trace.py#g
s#\bvalidate/oom\.py\b#validate/gpu/oom.py#g
# validate/records.find (a module's function written as a path) is the module, not the data folder
s#\bvalidate/records\.\([a-z_][a-z_0-9]*\)\b#validate/check/records.\1#g
# 6. data folders (after 5: validate/records.py is a module, validate/records/ data): validate/data/NAME.
s#\bvalidate/autotune_configs\b#validate/data/autotune_configs#g
s#\bvalidate/model_configs\b#validate/data/model_configs#g
s#\bvalidate/records\b#validate/data/records#g
s#\bvalidate/traces\b#validate/data/traces#g
s#\bvalidate/plans\b#validate/data/plans#g
# 7. data paths built with pathlib: "validate" / "records" -> "validate" / "data" / "records".
s#"validate" / "autotune_configs"#"validate" / "data" / "autotune_configs"#g
s#"validate" / "model_configs"#"validate" / "data" / "model_configs"#g
s#"validate" / "records"#"validate" / "data" / "records"#g
s#"validate" / "traces"#"validate" / "data" / "traces"#g
s#"validate" / "plans"#"validate" / "data" / "plans"#g
s#"validate" / "probes"#"validate" / "gpu" / "probes"#g
s#"validate" / "harnesses"#"validate" / "gpu" / "harnesses"#g
