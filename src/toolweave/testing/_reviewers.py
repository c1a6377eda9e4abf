"""A review handler for tests: records each request and answers with a fixed decision."""

from __future__ import annotations

import anyio

from toolweave.approval import ReviewDecision, ReviewRequest

__all__ = ('RecordingReviewHandler',)


class RecordingReviewHandler:
    """Records every `ReviewRequest` in `requests` and answers each with `decision` (approve by default), after
    `delay` seconds if given (to test timeouts and the order of concurrent reviews).

    ```python
    from toolweave import ReviewDecision
    from toolweave.testing import RecordingReviewHandler

    reviewer = RecordingReviewHandler(ReviewDecision.reject('not today'))
    print(reviewer.decision.kind, reviewer.requests)
    #> exit_early []
    ```
    """

    def __init__(self, decision: ReviewDecision | None = None, *, delay: float = 0.0) -> None:
        self.decision = decision or ReviewDecision.approve()
        self.delay = delay
        self.requests: list[ReviewRequest] = []

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        self.requests.append(request)
        if self.delay:
            await anyio.sleep(self.delay)
        return self.decision
