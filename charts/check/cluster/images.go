package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Image names of the e2e cluster. The tributary images are built from
// deploy/Dockerfile; the pause and load generator images are FROM-scratch
// images of static binaries built here. Nothing is pulled.
const (
	PauseImage   = "docker.io/library/tributary-e2e-pause:k8se2e"
	LoadgenImage = "docker.io/library/tributary-e2e-loadgen:k8se2e"
)

// ImageSpec is one image to build with docker from a context directory
// holding only the given files.
type ImageSpec struct {
	Tag        string            // e.g. tributary:k8se2e-a
	Dockerfile string            // path; empty: Inline
	Inline     string            // Dockerfile text
	Files      map[string]string // context path -> source file (copied)
	Dirs       []string          // empty directories in the context
	BuildArgs  map[string]string
}

// BuildImages builds the images with the machine's docker (classic
// builder, FROM scratch, so nothing is pulled), saves them into one
// archive and returns its path. Remove the images with RemoveImages.
func BuildImages(ctx context.Context, dir string, log io.Writer, specs []ImageSpec) (string, error) {
	var tags []string
	for i, s := range specs {
		cdir := filepath.Join(dir, fmt.Sprintf("ctx%d", i))
		if err := os.MkdirAll(cdir, 0o755); err != nil {
			return "", err
		}
		for dst, src := range s.Files {
			data, err := os.ReadFile(src)
			if err != nil {
				return "", fmt.Errorf("image %s: %w", s.Tag, err)
			}
			if err := os.WriteFile(filepath.Join(cdir, dst), data, 0o755); err != nil {
				return "", err
			}
		}
		for _, d := range s.Dirs {
			if err := os.MkdirAll(filepath.Join(cdir, d), 0o755); err != nil {
				return "", err
			}
		}
		df := s.Dockerfile
		if df == "" {
			df = filepath.Join(cdir, "Dockerfile")
			if err := os.WriteFile(df, []byte(s.Inline), 0o644); err != nil {
				return "", err
			}
		}
		args := []string{"build", "-q", "-t", s.Tag, "-f", df}
		for k, v := range s.BuildArgs {
			args = append(args, "--build-arg", k+"="+v)
		}
		args = append(args, cdir)
		cmd := exec.CommandContext(ctx, "docker", args...)
		cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("docker build %s: %w: %s", s.Tag, err, out)
		}
		fmt.Fprintf(log, "k8s-e2e: built image %s\n", s.Tag)
		tags = append(tags, s.Tag)
	}
	archive := filepath.Join(dir, "images.tar")
	if out, err := exec.CommandContext(ctx, "docker", append([]string{"save", "-o", archive}, tags...)...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("docker save: %w: %s", err, out)
	}
	return archive, nil
}

// RemoveImages removes the built images from docker.
func RemoveImages(specs []ImageSpec) error {
	var tags []string
	for _, s := range specs {
		tags = append(tags, s.Tag)
	}
	out, err := exec.Command("docker", append([]string{"rmi", "-f"}, tags...)...).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "No such image") {
		return fmt.Errorf("docker rmi: %w: %s", err, out)
	}
	return nil
}
