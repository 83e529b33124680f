"""nnterp: one vocabulary for the insides of every HuggingFace language model.

``from nnterp import StandardizedTransformer`` is the first line; the rest of
this namespace is what a family author builds with.
"""

from . import layouts as layouts
from .components import INTERFACE as INTERFACE
from .components import INTERIOR as INTERIOR
from .components import Attention as Attention
from .components import GatedAttention as GatedAttention
from .components import GatedSharedMoe as GatedSharedMoe
from .components import Glm4Attention as Glm4Attention
from .components import Glm4Mlp as Glm4Mlp
from .components import GraniteAttention as GraniteAttention
from .components import GraniteMlp as GraniteMlp
from .components import GraniteMoe as GraniteMoe
from .components import GraniteMoeShared as GraniteMoeShared
from .components import Layer as Layer
from .components import MixtralMoe as MixtralMoe
from .components import Mlp as Mlp
from .components import Moe as Moe
from .components import ParallelLayer as ParallelLayer
from .components import PostNormAttention as PostNormAttention
from .components import PostNormLayer as PostNormLayer
from .components import PostNormMlp as PostNormMlp
from .components import RescaledLayer as RescaledLayer
from .components import SandwichLayer as SandwichLayer
from .components import ScaledOutputLayer as ScaledOutputLayer
from .components import SharedMlpLayer as SharedMlpLayer
from .components import SigmoidMoe as SigmoidMoe
from .components import Standard as Standard
from .components import TopKFirstMoe as TopKFirstMoe
from .components import blocks_support as blocks_support
from .components import each_interior as each_interior
from .components import first_tensor as first_tensor
from .components import interface_reason as interface_reason
from .components import mixture_reason as mixture_reason
from .components import needs_eager as needs_eager
from .components import needs_grouped_experts as needs_grouped_experts
from .components import no_shared_expert as no_shared_expert
from .components import residual_multiplier as residual_multiplier
from .components import rewrap as rewrap
from .components import seq_first as seq_first
from .descriptors import DerivedEProperty as DerivedEProperty
from .descriptors import EProperty as EProperty
from .descriptors import TokenEProperty as TokenEProperty
from .descriptors import unavailable as unavailable
from .errors import CheckpointNotFound as CheckpointNotFound
from .errors import DeviceMapInvalid as DeviceMapInvalid
from .errors import FamilyMismatch as FamilyMismatch
from .errors import FamilyNotFound as FamilyNotFound
from .errors import GradientOutsideBackward as GradientOutsideBackward
from .errors import InvalidPrompt as InvalidPrompt
from .errors import MissingModule as MissingModule
from .errors import NeverRan as NeverRan
from .errors import OtherComponent as OtherComponent
from .errors import OutOfOrder as OutOfOrder
from .errors import SourceNotAvailable as SourceNotAvailable
from .errors import Unavailable as Unavailable
from .errors import UnknownValue as UnknownValue
from .errors import WriteMismatch as WriteMismatch
from .family import Family as Family
from .layouts import ExpertIndices as ExpertIndices
from .layouts import ExpertOutputs as ExpertOutputs
from .layouts import ExpertWeights as ExpertWeights
from .layouts import HeadOutputs as HeadOutputs
from .layouts import Keys as Keys
from .layouts import Logits as Logits
from .layouts import Neurons as Neurons
from .layouts import Pattern as Pattern
from .layouts import Queries as Queries
from .layouts import Residual as Residual
from .layouts import RouterLogits as RouterLogits
from .layouts import Values as Values
from .layouts import axis_size as axis_size
from .reasons import NOT_ON_INTERFACE as NOT_ON_INTERFACE
from .reasons import PARALLEL as PARALLEL
from .reasons import POST_NORM_ATTENTION as POST_NORM_ATTENTION
from .reasons import POST_NORM_MLP as POST_NORM_MLP
from .tiny import TinyConfig as TinyConfig
from .transformer import StandardizedTransformer as StandardizedTransformer

__version__ = "0.1.0"
