package main

import (
	"os"
	"strings"
	"testing"
)

func TestSelectBlocksKeepsOnlyGrantedDevices(t *testing.T) {
	for _, tc := range []struct {
		file, row string
		lines     int
	}{
		{"../../data/replay/nvidia-smi-table-h100-8gpu.txt", "NVIDIA H100 80GB HBM3", 4},
		{"../../data/replay/npu-smi-info-910b3-8npu-healthy.txt", "910B3", 3},
	} {
		capture, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		all := string(selectBlocks(capture, []int{0, 1, 2, 3, 4, 5, 6, 7}))
		if all != string(capture) {
			t.Errorf("%s: selecting every device must give the capture back unchanged", tc.file)
		}
		got := string(selectBlocks(capture, []int{2}))
		if n := strings.Count(got, tc.row); n != 1 {
			t.Errorf("%s: want 1 device row, got %d:\n%s", tc.file, n, got)
		}
		if want := strings.Count(string(capture), "\n") - 7*tc.lines; strings.Count(got, "\n") != want {
			t.Errorf("%s: want %d lines, got %d:\n%s", tc.file, want, strings.Count(got, "\n"), got)
		}
		for _, l := range strings.SplitAfter(got, "\n") {
			if !strings.Contains(string(capture), l) {
				t.Errorf("%s: line not in the capture: %q", tc.file, l)
			}
		}
	}
}
