"""Exceptions raised by mixq.

Every error of the C++ library (``mixq::Error``) arrives as an instance of :class:`MixqError`
carrying the library's message (which names the offending argument and values) and its error
code. Each code has its own subclass, which also derives from the matching builtin exception,
so that ``except ValueError`` catches bad arguments and ``except OSError`` unreadable files.
"""

__all__ = [
    "MixqError", "InvalidArgumentError", "UnsupportedError", "FormatError", "IoError",
    "CudaError", "InternalError",
]


class MixqError(RuntimeError):
    """Base class of mixq's exceptions.

    Attributes:
        code: the C++ ``mixq::ErrorCode`` name: ``"invalid argument"``, ``"unsupported"``,
            ``"format error"``, ``"i/o error"``, ``"cuda error"`` or ``"internal error"``.
        message: the C++ message, e.g. ``"mixq: invalid argument: linear: x.shape[1] (4095)
            must equal weight K (4096)"``.
    """

    code = "error"

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidArgumentError(MixqError, ValueError):
    """A wrong shape, dtype, stride, alignment, device or option value."""

    code = "invalid argument"


class UnsupportedError(MixqError, NotImplementedError):
    """A valid combination that this backend or build does not implement."""

    code = "unsupported"


class FormatError(MixqError, ValueError):
    """Malformed checkpoint content (bad magic, truncated, inconsistent header)."""

    code = "format error"


class IoError(MixqError, OSError):
    """A file that cannot be opened, read or written."""

    code = "i/o error"


class CudaError(MixqError):
    """A CUDA runtime or cuBLAS failure."""

    code = "cuda error"


class InternalError(MixqError):
    """A bug in mixq."""

    code = "internal error"


# Indexed by the C++ enum mixq::ErrorCode (include/mixq/error.hpp); keep the order in step.
ERROR_CLASSES = (InvalidArgumentError, UnsupportedError, FormatError, IoError, CudaError,
                 InternalError)
