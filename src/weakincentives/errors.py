"""The error tree of weakincentives.

Every error the library raises derives from `WinkError`; each subsystem has one base,
and leaves mix in the builtin exception that fits, so `except ValueError` keeps working
for code that does not know about us::

    WinkError
    ├── ConfigurationError (ValueError)       a run or component is configured wrongly
    ├── SerdeError (ValueError)               JSON <-> dataclass conversion failed
    ├── PromptError
    │   ├── PromptRenderError (ValueError)    unknown or missing placeholder
    │   ├── PromptParamsError (TypeError)     params of the wrong type
    │   └── OverridesError (ValueError)       invalid overrides tag, key or file
    ├── ToolError
    │   └── ToolValidationError (ValueError)  tool params failed validation
    ├── AdapterError
    │   ├── AdapterConnectionError (ConnectionError)
    │   ├── AdapterTimeoutError (TimeoutError)
    │   ├── RateLimitError                    429 after all retries
    │   ├── ProviderServerError               5xx after all retries
    │   ├── ProviderRequestError (ValueError) 4xx other than 429
    │   ├── AdapterResponseError (ValueError) malformed or unparseable response
    │   └── TurnLimitExceededError            the tool loop did not finish
    ├── ExecutionError
    │   ├── DeadlineExceededError (TimeoutError)
    │   └── BudgetExceededError
    ├── MailboxError
    │   ├── MailboxConnectionError (ConnectionError)
    │   ├── MailboxClosedError
    │   ├── MailboxFullError                  the mailbox reached its max_size
    │   ├── MailboxArgumentError (ValueError)
    │   ├── ReceiptHandleExpiredError
    │   ├── MailboxResolutionError (LookupError)
    │   │   └── NoReplyToError                reply() on a message sent without reply_to
    │   └── MessageDecodeError (ValueError)
    ├── EvalError
    │   ├── InvalidDatasetError (ValueError)
    │   ├── InvalidReportError (ValueError)    a saved report or results file is unreadable
    │   ├── InvalidScoreError (ValueError)
    │   ├── InvalidStatisticError (ValueError) bad input to a statistic (empty, k > n, ...)
    │   ├── JudgeError
    │   ├── EnvironmentMismatchError (ValueError)
    │   └── RunStoreError
    │       └── FingerprintMismatchError
    └── DebugError
        ├── BundleError (ValueError)
        ├── QueryError (ValueError)
        └── ViewerError (ValueError)      `wink debug` target unreadable, or a bad request
"""

from __future__ import annotations


class WinkError(Exception):
    """Root of every error raised by weakincentives."""


class ConfigurationError(WinkError, ValueError):
    """A component or run is configured wrongly; fix the configuration and retry."""


class SerdeError(WinkError, ValueError):
    """A value could not be converted between JSON and its Python type."""


# -- prompts and tools ---------------------------------------------------------------


class PromptError(WinkError):
    """Base of prompt template, binding and override errors."""


class PromptRenderError(PromptError, ValueError):
    """A template placeholder is unknown or has no bound value."""


class PromptParamsError(PromptError, TypeError):
    """Params bound to a prompt are of the wrong type."""


class OverridesError(PromptError, ValueError):
    """An overrides tag or key is invalid, or an overrides file cannot be read."""


class ToolError(WinkError):
    """Base of tool errors."""


class ToolValidationError(ToolError, ValueError):
    """Arguments sent by the model do not validate against the tool's params type."""


# -- adapters --------------------------------------------------------------------------


class AdapterError(WinkError):
    """Base of provider adapter errors."""


class AdapterConnectionError(AdapterError, ConnectionError):
    """The provider could not be reached."""


class AdapterTimeoutError(AdapterError, TimeoutError):
    """The provider did not answer within the request timeout."""


class RateLimitError(AdapterError):
    """The provider kept answering 429 after every retry."""


class ProviderServerError(AdapterError):
    """The provider kept answering 5xx after every retry."""


class ProviderRequestError(AdapterError, ValueError):
    """The provider rejected the request (4xx other than 429)."""


class AdapterResponseError(AdapterError, ValueError):
    """The provider's answer could not be parsed or does not match the output type."""


class TurnLimitExceededError(AdapterError):
    """The model kept calling tools past the adapter's turn limit."""


# -- execution limits ------------------------------------------------------------------


class ExecutionError(WinkError):
    """Base of errors that stop an agent run."""


class DeadlineExceededError(ExecutionError, TimeoutError):
    """The run passed its deadline."""


class BudgetExceededError(ExecutionError):
    """The run used more tokens than its budget allows."""


# -- mailboxes -------------------------------------------------------------------------


class MailboxError(WinkError):
    """Base of mailbox errors."""


class MailboxConnectionError(MailboxError, ConnectionError):
    """The mailbox backend could not be reached."""


class MailboxClosedError(MailboxError):
    """The mailbox was closed."""


class MailboxFullError(MailboxError):
    """The mailbox holds `max_size` messages; receive and acknowledge some, then send again."""


class MailboxArgumentError(MailboxError, ValueError):
    """An argument to a mailbox call is out of range."""


class ReceiptHandleExpiredError(MailboxError):
    """The receipt handle no longer owns the message (it was redelivered or settled)."""


class MailboxResolutionError(MailboxError, LookupError):
    """A reply-to name could not be resolved to a mailbox."""


class NoReplyToError(MailboxResolutionError):
    """`Message.reply()` was called on a message that was sent without `reply_to`."""


class MessageDecodeError(MailboxError, ValueError):
    """A message body could not be decoded into its type."""


# -- evals -----------------------------------------------------------------------------


class EvalError(WinkError):
    """Base of evaluation errors."""


class InvalidDatasetError(EvalError, ValueError):
    """A dataset file or sample is invalid; the message names the file, line and field."""


class InvalidReportError(EvalError, ValueError):
    """A saved report or results file cannot be read; the message names the file and line."""


class InvalidScoreError(EvalError, ValueError):
    """A score or metric holds a value that is not allowed (NaN, infinite)."""


class InvalidStatisticError(EvalError, ValueError):
    """Input to a statistic is invalid (empty, mismatched lengths, out of range, not finite)."""


class JudgeError(EvalError):
    """An LLM judge call failed or returned something that cannot be parsed."""


class EnvironmentMismatchError(EvalError, ValueError):
    """A serialized environment has another kind or an incompatible version."""


class RunStoreError(EvalError):
    """A run directory cannot be read or written."""


class FingerprintMismatchError(RunStoreError):
    """A resumed run's fingerprint differs from the stored one."""


# -- debugging tools -------------------------------------------------------------------


class DebugError(WinkError):
    """Base of debug bundle, query and viewer errors."""


class BundleError(DebugError, ValueError):
    """A debug bundle is malformed, unsafe or fails its checksums."""


class QueryError(DebugError, ValueError):
    """A `wink query` statement was rejected or failed."""


class ViewerError(DebugError, ValueError):
    """`wink debug` cannot show its target, or a request to the viewer is invalid."""
