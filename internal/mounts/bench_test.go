package mounts

import (
	"testing"

	"github.com/clawpen/clawpen/internal/domain"
)

// BenchmarkValidate shows that re-validating before every invocation is cheap.
func BenchmarkValidate(b *testing.B) {
	tr := newTree(b)
	al := tr.load(b, sampleJSON)
	req := domain.MountRequest{HostPath: "~/rootlink/app/link-in", ContainerPath: "src"}
	for b.Loop() {
		if _, err := Validate(al, req, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMasks(b *testing.B) {
	tr := newTree(b)
	al := tr.load(b, sampleJSON)
	for b.Loop() {
		if _, err := Masks(tr.projects, al, 0); err != nil {
			b.Fatal(err)
		}
	}
}
