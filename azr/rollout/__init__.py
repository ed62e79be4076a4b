"""Samplers: the model generating completions for both roles, behind one ``Sampler`` protocol.

Engines: Hugging Face ``generate`` (CPU, and any machine; ``azr.rollout.hf``) and vLLM (GPU;
``azr.rollout.vllm``). Both return processed log-probs at the sampling temperature, and load the weights
the learner publishes for a policy version.
"""
