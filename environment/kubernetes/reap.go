package kubernetes

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codegirl-games/agentbox/environment"
)

var _ environment.Reaper = (*Backend)(nil)

// Reap implements environment.Reaper: it finds the Pods of the namespace
// labelled as agentbox's whose owning process (on this host) is gone, and
// deletes them. Pods owned by live processes, or by other hosts, are left
// alone unless All is set; a Pod that ended (its attach stream did) is
// deleted once its owner is gone, like any other.
func (b *Backend) Reap(ctx context.Context, opts environment.ReapOptions) ([]environment.Reaped, error) {
	c, err := b.connect()
	if err != nil {
		return nil, err
	}
	if err := c.ping(ctx); err != nil {
		return nil, err // gc without --backend passes over a cluster that does not answer
	}
	sel := LabelTool + "=agentbox"
	if opts.RunID != "" {
		sel += "," + LabelRun + "=" + RunLabel(opts.RunID)
	}
	list, err := c.cs.CoreV1().Pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, c.apiError("list agentbox's pods", err)
	}
	here := environment.ThisProcess()
	var out []environment.Reaped
	for _, p := range list.Items {
		a := p.Annotations
		r := environment.Reaped{ID: p.Namespace + "/" + p.Name, Name: p.Name, RunID: a[AnnotationRun],
			Owner: a[AnnotationOwnerHost] + "/" + a[AnnotationOwnerPID], Created: p.CreationTimestamp.UTC().Format(time.RFC3339)}
		// The run is the annotation's: the label is the run's ID shortened.
		var reap bool
		reap, r.Reason = opts.Decide(here, environment.Owner{Host: a[AnnotationOwnerHost], PID: a[AnnotationOwnerPID], Start: a[AnnotationOwnerStart], RunID: a[AnnotationRun]})
		if !reap {
			continue
		}
		if !opts.DryRun {
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			zero := int64(0)
			err := c.cs.CoreV1().Pods(c.namespace).Delete(dctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			cancel()
			if err != nil && !apierrors.IsNotFound(err) {
				r.Err = c.apiError("delete pod "+p.Name, err)
			} else {
				r.Removed = true
			}
		}
		out = append(out, r)
	}
	return out, nil
}
