"""wormref: the independent Python reference wormchat's C++ engine is checked against.

Modules (import as `from wormref import falcon_ref`; scripts in tools/python/ find the package
because Python puts a script's own directory on the import path):

    config          FalconConfig: config.json resolved as HF does (torch-free)
    safetensors_io  safetensors and HF checkpoint-dir reading/writing (numpy only)
    slow_ref        float64 per-token, per-head numpy loop of the Falcon forward pass, rotary or
                    ALiBi (numpy only)
    alibi           HF Falcon's ALiBi slopes and bias with its bf16 roundings (numpy only)
    falcon_ref      PyTorch Falcon forward pass, checkpoint load/save (needs torch)
    beam_ref        issue 13's beam search over falcon_ref, and the beam fixture cases (needs torch)
    llama_config    LlamaConfig: an HF Llama (Falcon3) config.json resolved as HF does (torch-free)
    llama_ref       float64 numpy LlamaForCausalLM forward pass and RoPE inv_freq (numpy only)
    fixture_io      what the fixture generators and logits scripts share: checkpoint dirs in HF's
                    layout, ids files, .npy logits, --check helpers, README sections, command
                    lines (numpy only)

Nothing here is imported at package import time, so the numpy-only modules work without torch.
"""

import os

# The repository root (tools/python/wormref/ -> ../../..), for default fixture paths.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
