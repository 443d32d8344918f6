"""The graph path: torch.export captures the model (export.py, with the
SDPA calls made as eager makes them: sdpa.py), one real forward gives each
node's facts and the cut rules choose stage boundaries (cut.py), the stages
become GraphModules (stages.py) run by GraphProgram (program.py), and each
stage is measured (measure.py)."""
