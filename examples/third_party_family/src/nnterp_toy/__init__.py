"""nnterp-toy: a model outside transformers, and the nnterp family that serves it, registered like any other."""

from transformers import AutoConfig, AutoModelForCausalLM

from .modeling import ToyConfig, ToyForCausalLM

AutoConfig.register(ToyConfig.model_type, ToyConfig)
AutoModelForCausalLM.register(ToyConfig, ToyForCausalLM)
