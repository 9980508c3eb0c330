package anthropic

import (
	"fmt"

	sdk "github.com/anthropics/anthropic-sdk-go"
)

// The context follows Anthropic's computer-use demo: the first user message
// (the first screenshot and the state), then every assistant turn with its
// tool_use blocks and the user turn with their tool_results. Only the
// latest max_screenshots images stay; older ones become a text note. At
// most max_history turns are kept after the first message; older turns are
// dropped in whole (tool_use, tool_result) pairs, so every tool_use keeps
// its result.

// omittedImage replaces a screenshot that is no longer among the latest.
func omittedImage(n int) string {
	return fmt.Sprintf("[screenshot omitted: only the latest %d are kept]", n)
}

// trim applies max_history and max_screenshots to the history in place.
func (a *Agent) trim() {
	keep := max(a.cfg.MaxHistory, 1)
	for len(a.msgs)-1 > 2*keep && len(a.msgs) > 3 {
		// msgs[1] is an assistant turn and msgs[2] its results.
		a.msgs = append(a.msgs[:1], a.msgs[3:]...)
		a.dropped++
	}
	seen := 0
	note := omittedImage(a.cfg.MaxScreenshots)
	for i := len(a.msgs) - 1; i >= 0; i-- {
		blocks := a.msgs[i].Content
		for j := len(blocks) - 1; j >= 0; j-- {
			switch b := &blocks[j]; {
			case b.OfImage != nil:
				seen++
				if seen > a.cfg.MaxScreenshots {
					*b = sdk.BetaContentBlockParamUnion{OfText: &sdk.BetaTextBlockParam{Text: note}}
				}
			case b.OfToolResult != nil:
				c := b.OfToolResult.Content
				for k := len(c) - 1; k >= 0; k-- {
					if c[k].OfImage != nil {
						seen++
						if seen > a.cfg.MaxScreenshots {
							c[k] = sdk.BetaToolResultBlockParamContentUnion{OfText: &sdk.BetaTextBlockParam{Text: note}}
						}
					}
				}
			}
		}
	}
}

// window is the history as sent: the first message says how many turns
// were dropped, if any.
func (a *Agent) window() []sdk.BetaMessageParam {
	if a.dropped == 0 || len(a.msgs) == 0 {
		return a.msgs
	}
	out := append([]sdk.BetaMessageParam(nil), a.msgs...)
	first := out[0]
	first.Content = append(append([]sdk.BetaContentBlockParamUnion(nil), first.Content...),
		sdk.BetaContentBlockParamUnion{OfText: &sdk.BetaTextBlockParam{
			Text: fmt.Sprintf("[%d earlier turns omitted: only the latest %d are kept]", a.dropped, max(a.cfg.MaxHistory, 1))}})
	out[0] = first
	return out
}
