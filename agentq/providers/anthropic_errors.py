"""What the `anthropic` SDK's exceptions mean (no module outside the adapter imports the SDK)."""
from __future__ import annotations

import anthropic

from agentq.providers.retry import SdkErrors, sdk_classifier

classify = sdk_classifier(timeout=anthropic.APITimeoutError, connection=anthropic.APIConnectionError,
                          status=anthropic.APIStatusError, api=anthropic.APIError)
ANTHROPIC_ERRORS = SdkErrors(anthropic.AnthropicError, classify)
