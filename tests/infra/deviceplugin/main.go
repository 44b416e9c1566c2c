// Command hetero-device-plugin is pytest-hetero's test device plugin: it speaks the real kubelet
// device-plugin API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1) for stand-in accelerators, so a
// real kubelet computes capacity/allocatable, the scheduler places by them and the container gets what
// a vendor plugin hands out.
//
// Resources (one gRPC server and one registration each):
//
//	nvidia.com/gpu        IDs GPU-00000000-0000-4000-8000-00000000000<i>; Allocate returns
//	                      NVIDIA_VISIBLE_DEVICES=<ids>, /dev/nvidia<i> + /dev/nvidiactl + /dev/nvidia-uvm,
//	                      and mounts of a driver folder at /usr/local/nvidia plus /usr/bin/nvidia-smi
//	huawei.com/Ascend910  IDs Ascend910-<i>; Allocate returns ASCEND_VISIBLE_DEVICES=<i,...>,
//	                      /dev/davinci<i> + /dev/davinci_manager + /dev/devmm_svm + /dev/hisi_hdc,
//	                      and mounts of a driver folder at /usr/local/Ascend/driver plus
//	                      /usr/local/sbin/npu-smi
//
// The device nodes are character devices made with mknod under -state/dev, using majors that no
// driver on this host has registered (checked against /proc/devices at start), so opening one fails
// like a GPU without its kernel driver. nvidia-smi / npu-smi are replays: each allocation gets a
// folder whose tool prints the real capture given by -nvidia-smi / -npu-smi, keeping the header,
// footer and the blocks of the allocated devices only (host indices kept).
//
// Controls (files under -state/control/<resource with / replaced by _>/, polled every 300 ms):
//
//	unhealthy       device indices or IDs, one per line: reported Unhealthy in ListAndWatch
//	allocate-error  if present, Allocate fails with its text as the gRPC error message
//	extra-devices   an integer N: Allocate hands N more devices than asked (over-allocation)
//	missing-driver  if present, the driver-folder mounts name host paths that do not exist (as when
//	                a driver container has not populated its root yet); containerd creates them as
//	                empty directories, so the container starts and the tool is not executable
//
// Each Allocate appends one JSON line to -state/allocations.jsonl.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// node is a stand-in device node: host file under state/dev, container path, char major:minor.
type node struct {
	name         string // file name under state/dev and /dev
	major, minor uint32
}

// resource describes one extended resource and what its vendor plugin hands a container.
type resource struct {
	name       string // extended resource name
	socket     string // socket file name under the kubelet's device-plugins dir
	count      int
	id         func(i int) string
	perDevice  func(i int) node
	shared     []node // device nodes every allocation gets (control devices)
	envName    string // visible-devices variable
	envValue   func(ids []string, idx []int) string
	driverPath string // container path of the driver folder
	toolPath   string // container path of the replay tool
	toolName   string // file name of the tool inside the driver folder
	capture    string // host path of the real capture the tool replays
}

func gpuID(i int) string { return fmt.Sprintf("GPU-00000000-0000-4000-8000-%012x", i) }

func resources(nGPU, nNPU int, nvidiaSmi, npuSmi string) []*resource {
	return []*resource{
		{
			name: "nvidia.com/gpu", socket: "hetero-nvidia-gpu.sock", count: nGPU, id: gpuID,
			perDevice:  func(i int) node { return node{fmt.Sprintf("nvidia%d", i), 195, uint32(i)} },
			shared:     []node{{"nvidiactl", 195, 255}, {"nvidia-uvm", 240, 0}},
			envName:    "NVIDIA_VISIBLE_DEVICES",
			envValue:   func(ids []string, _ []int) string { return strings.Join(ids, ",") },
			driverPath: "/usr/local/nvidia", toolPath: "/usr/bin/nvidia-smi", toolName: "nvidia-smi",
			capture: nvidiaSmi,
		},
		{
			name: "huawei.com/Ascend910", socket: "hetero-ascend910.sock", count: nNPU,
			id:        func(i int) string { return fmt.Sprintf("Ascend910-%d", i) },
			perDevice: func(i int) node { return node{fmt.Sprintf("davinci%d", i), 236, uint32(i)} },
			shared:    []node{{"davinci_manager", 237, 0}, {"devmm_svm", 238, 0}, {"hisi_hdc", 239, 0}},
			envName:   "ASCEND_VISIBLE_DEVICES",
			envValue: func(_ []string, idx []int) string {
				s := make([]string, len(idx))
				for k, i := range idx {
					s[k] = strconv.Itoa(i)
				}
				return strings.Join(s, ",")
			},
			driverPath: "/usr/local/Ascend/driver", toolPath: "/usr/local/sbin/npu-smi", toolName: "npu-smi",
			capture: npuSmi,
		},
	}
}

func (r *resource) controlDir(state string) string {
	return filepath.Join(state, "control", strings.ReplaceAll(r.name, "/", "_"))
}

// plugin serves one resource.
type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	res      *resource
	state    string
	kubelet  string // device-plugins dir
	mu       sync.Mutex
	health   map[string]string // id -> Healthy/Unhealthy
	changed  chan struct{}
	server   *grpc.Server
	allocLog *os.File
}

func (p *plugin) devices() []*pluginapi.Device {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*pluginapi.Device, 0, p.res.count)
	for i := 0; i < p.res.count; i++ {
		id := p.res.id(i)
		out = append(out, &pluginapi.Device{ID: id, Health: p.health[id]})
	}
	return out
}

// pollHealth reads the unhealthy control file and signals ListAndWatch on change.
func (p *plugin) pollHealth(ctx context.Context) {
	file := filepath.Join(p.res.controlDir(p.state), "unhealthy")
	for {
		bad := map[string]bool{}
		if data, err := os.ReadFile(file); err == nil {
			for _, f := range strings.Fields(string(data)) {
				if i, err := strconv.Atoi(f); err == nil {
					f = p.res.id(i)
				}
				bad[f] = true
			}
		}
		next := map[string]string{}
		for i := 0; i < p.res.count; i++ {
			id := p.res.id(i)
			next[id] = pluginapi.Healthy
			if bad[id] {
				next[id] = pluginapi.Unhealthy
			}
		}
		p.mu.Lock()
		diff := !reflect.DeepEqual(next, p.health)
		if diff {
			for id, h := range next {
				if p.health[id] != h {
					log.Printf("%s: device %s is now %s", p.res.name, id, h)
				}
			}
			p.health = next
		}
		p.mu.Unlock()
		if diff {
			select {
			case p.changed <- struct{}{}:
			default:
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices()}); err != nil {
			return err
		}
		select {
		case <-s.Context().Done():
			return nil
		case <-p.changed:
		}
	}
}

// index returns the device index of an ID, or -1.
func (p *plugin) index(id string) int {
	for i := 0; i < p.res.count; i++ {
		if p.res.id(i) == id {
			return i
		}
	}
	return -1
}

// GetPreferredAllocation prefers the lowest indices, so a lone pod on a fresh node gets device 0.
func (p *plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, c := range req.ContainerRequests {
		chosen := append([]string{}, c.MustIncludeDeviceIDs...)
		have := map[string]bool{}
		for _, id := range chosen {
			have[id] = true
		}
		avail := append([]string{}, c.AvailableDeviceIDs...)
		sort.Slice(avail, func(a, b int) bool { return p.index(avail[a]) < p.index(avail[b]) })
		for _, id := range avail {
			if len(chosen) >= int(c.AllocationSize) {
				break
			}
			if !have[id] {
				chosen = append(chosen, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: chosen})
	}
	return resp, nil
}

func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	ctl := p.res.controlDir(p.state)
	if msg, err := os.ReadFile(filepath.Join(ctl, "allocate-error")); err == nil {
		text := strings.TrimSpace(string(msg))
		if text == "" {
			text = "hetero test device plugin: allocate-error control set"
		}
		log.Printf("%s: Allocate refused by control file: %s", p.res.name, text)
		p.record(map[string]any{"resource": p.res.name, "error": text})
		return nil, errors.New(text)
	}
	extra := 0
	if data, err := os.ReadFile(filepath.Join(ctl, "extra-devices")); err == nil {
		extra, _ = strconv.Atoi(strings.TrimSpace(string(data)))
	}
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		var idx []int
		for _, id := range c.DevicesIds {
			i := p.index(id)
			if i < 0 {
				return nil, fmt.Errorf("unknown %s device %q", p.res.name, id)
			}
			idx = append(idx, i)
		}
		sort.Ints(idx)
		granted := append([]int{}, idx...)
		for i := 0; i < p.res.count && extra > 0; i++ {
			if !containsInt(granted, i) {
				granted = append(granted, i)
				extra--
			}
		}
		sort.Ints(granted)
		ids := make([]string, len(granted))
		for k, i := range granted {
			ids[k] = p.res.id(i)
		}
		cr := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{p.res.envName: p.res.envValue(ids, granted)}}
		for _, i := range granted {
			cr.Devices = append(cr.Devices, p.deviceSpec(p.res.perDevice(i)))
		}
		for _, n := range p.res.shared {
			cr.Devices = append(cr.Devices, p.deviceSpec(n))
		}
		dir, err := p.driverFolder(granted)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(filepath.Join(ctl, "missing-driver")); err == nil {
			dir = filepath.Join(p.state, "driver", "absent", fmt.Sprintf("%s-%d", p.res.toolName, time.Now().UnixNano()))
		}
		cr.Mounts = []*pluginapi.Mount{
			{ContainerPath: p.res.driverPath, HostPath: dir, ReadOnly: true},
			{ContainerPath: p.res.toolPath, HostPath: filepath.Join(dir, "bin", p.res.toolName), ReadOnly: true},
		}
		resp.ContainerResponses = append(resp.ContainerResponses, cr)
		log.Printf("%s: Allocate %v -> indices %v, env %s=%s", p.res.name, c.DevicesIds, granted, p.res.envName, cr.Envs[p.res.envName])
		p.record(map[string]any{"resource": p.res.name, "requested": c.DevicesIds, "indices": granted,
			"env": cr.Envs, "driver": dir})
	}
	return resp, nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (p *plugin) deviceSpec(n node) *pluginapi.DeviceSpec {
	return &pluginapi.DeviceSpec{ContainerPath: "/dev/" + n.name, HostPath: filepath.Join(p.state, "dev", n.name), Permissions: "rw"}
}

func (p *plugin) record(v map[string]any) {
	v["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(v)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = p.allocLog.Write(append(b, '\n'))
}

// driverFolder writes (once per device set) the folder mounted as the driver: bin/<tool> replays
// <tool>.out, which holds the real capture limited to the granted devices.
func (p *plugin) driverFolder(idx []int) (string, error) {
	parts := make([]string, len(idx))
	for k, i := range idx {
		parts[k] = strconv.Itoa(i)
	}
	dir := filepath.Join(p.state, "driver", p.res.toolName+"-"+strings.Join(parts, "_"))
	out := filepath.Join(dir, p.res.toolName+".out")
	if _, err := os.Stat(out); err == nil {
		return dir, nil
	}
	capture, err := os.ReadFile(p.res.capture)
	if err != nil {
		return "", fmt.Errorf("replay capture for %s: %w", p.res.toolName, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return "", err
	}
	script := fmt.Sprintf("#!/bin/sh\n# replay of a real %[1]s capture (pytest-hetero test device plugin)\n"+
		"if [ $# -gt 0 ]; then echo \"%[1]s (replay): only the plain '%[1]s' output was recorded; got: $*\" >&2; exit 2; fi\n"+
		"exec cat %[2]s/%[1]s.out\n", p.res.toolName, p.res.driverPath)
	if err := os.WriteFile(filepath.Join(dir, "bin", p.res.toolName), []byte(script), 0o755); err != nil {
		return "", err
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, selectBlocks(capture, idx), 0o644); err != nil {
		return "", err
	}
	return dir, os.Rename(tmp, out)
}

// selectBlocks keeps a device table's header (up to the first "|=" / "+=" rule), every device
// block (lines up to a "+" rule) whose first line starts with an allocated index, and the rest after
// the table (a blank line or any line starting with neither "|" nor "+") verbatim.
func selectBlocks(capture []byte, idx []int) []byte {
	lines := strings.SplitAfter(string(capture), "\n")
	var out strings.Builder
	i := 0
	for ; i < len(lines); i++ {
		out.WriteString(lines[i])
		if strings.HasPrefix(lines[i], "|=") || strings.HasPrefix(lines[i], "+=") {
			i++
			break
		}
	}
	for i < len(lines) {
		l := lines[i]
		if !strings.HasPrefix(l, "|") {
			break
		}
		start := i
		for i < len(lines) && !strings.HasPrefix(lines[i], "+") {
			i++
		}
		end := i + 1
		if end > len(lines) {
			end = len(lines)
		}
		fields := strings.Fields(strings.TrimPrefix(lines[start], "|"))
		if len(fields) > 0 {
			if n, err := strconv.Atoi(fields[0]); err == nil && containsInt(idx, n) {
				out.WriteString(strings.Join(lines[start:end], ""))
			}
		}
		i = end
	}
	out.WriteString(strings.Join(lines[i:], ""))
	return []byte(out.String())
}

// makeNodes creates the stand-in character devices, refusing majors a real driver registered.
func makeNodes(state string, rs []*resource) error {
	registered := map[uint32]string{}
	f, err := os.Open("/proc/devices")
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Block devices") {
			break
		}
		var major uint32
		var name string
		if n, _ := fmt.Sscanf(line, "%d %s", &major, &name); n == 2 {
			registered[major] = name
		}
	}
	f.Close()
	dev := filepath.Join(state, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	for _, r := range rs {
		nodes := append([]node{}, r.shared...)
		for i := 0; i < r.count; i++ {
			nodes = append(nodes, r.perDevice(i))
		}
		for _, n := range nodes {
			if drv, ok := registered[n.major]; ok {
				return fmt.Errorf("char major %d is registered by driver %q on this host; refusing to hand it out as %s", n.major, drv, n.name)
			}
			path := filepath.Join(dev, n.name)
			_ = os.Remove(path)
			if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, int(n.major<<8|n.minor&0xff|(n.minor&^0xff)<<12)); err != nil {
				return fmt.Errorf("mknod %s: %w", path, err)
			}
			// 0666 as the vendors' nodes are (mknod's mode went through the umask)
			if err := os.Chmod(path, 0o666); err != nil {
				return err
			}
		}
	}
	return nil
}

// serve starts the gRPC server on the plugin socket and registers with the kubelet.
func (p *plugin) serve() error {
	sock := filepath.Join(p.kubelet, p.res.socket)
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	p.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.server, p)
	go func() { _ = p.server.Serve(l) }()
	conn, err := grpc.NewClient("unix://"+filepath.Join(p.kubelet, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: p.res.socket, ResourceName: p.res.name,
		Options: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	})
	if err != nil {
		p.server.Stop()
		return fmt.Errorf("register %s: %w", p.res.name, err)
	}
	log.Printf("%s: registered %d devices (socket %s)", p.res.name, p.res.count, sock)
	return nil
}

// keepRegistered re-serves and re-registers whenever the kubelet restarts (it deletes every socket in
// its device-plugins dir and recreates kubelet.sock).
func (p *plugin) keepRegistered(ctx context.Context) {
	sock := filepath.Join(p.kubelet, p.res.socket)
	kubeletSock := filepath.Join(p.kubelet, "kubelet.sock")
	var kubeletIno uint64
	registered := false
	for {
		var st syscall.Stat_t
		kerr := syscall.Stat(kubeletSock, &st)
		_, serr := os.Stat(sock)
		if registered && (serr != nil || kerr != nil || st.Ino != kubeletIno) {
			log.Printf("%s: kubelet restarted or socket removed; registering again", p.res.name)
			p.server.Stop()
			registered = false
		}
		if !registered && kerr == nil {
			if err := p.serve(); err != nil {
				log.Printf("%s: %v (retrying)", p.res.name, err)
			} else {
				registered, kubeletIno = true, st.Ino
			}
		}
		select {
		case <-ctx.Done():
			if registered {
				p.server.Stop()
				_ = os.Remove(sock)
			}
			return
		case <-time.After(time.Second):
		}
	}
}

func main() {
	state := flag.String("state", "/tmp/hetero-realnode/deviceplugin", "state dir: dev/, driver/, control/, allocations.jsonl")
	kubeletDir := flag.String("kubelet-dir", pluginapi.DevicePluginPath, "the kubelet's device-plugins dir")
	nGPU := flag.Int("nvidia", 4, "number of nvidia.com/gpu devices (0 disables the resource)")
	nNPU := flag.Int("ascend", 4, "number of huawei.com/Ascend910 devices (0 disables the resource)")
	nvidiaSmi := flag.String("nvidia-smi", "", "real nvidia-smi table capture replayed in containers")
	npuSmi := flag.String("npu-smi", "", "real npu-smi info capture replayed in containers")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds | log.LUTC)

	var rs []*resource
	for _, r := range resources(*nGPU, *nNPU, *nvidiaSmi, *npuSmi) {
		if r.count > 0 {
			if r.capture == "" {
				log.Fatalf("%s: no capture file given for %s", r.name, r.toolName)
			}
			rs = append(rs, r)
		}
	}
	for _, d := range []string{"driver", "control"} {
		if err := os.MkdirAll(filepath.Join(*state, d), 0o755); err != nil {
			log.Fatal(err)
		}
	}
	if err := makeNodes(*state, rs); err != nil {
		log.Fatal(err)
	}
	allocLog, err := os.OpenFile(filepath.Join(*state, "allocations.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var wg sync.WaitGroup
	for _, r := range rs {
		if err := os.MkdirAll(r.controlDir(*state), 0o755); err != nil {
			log.Fatal(err)
		}
		health := map[string]string{}
		for i := 0; i < r.count; i++ {
			health[r.id(i)] = pluginapi.Healthy
		}
		p := &plugin{res: r, state: *state, kubelet: *kubeletDir, health: health,
			changed: make(chan struct{}, 1), allocLog: allocLog}
		wg.Add(2)
		go func() { defer wg.Done(); p.pollHealth(ctx) }()
		go func() { defer wg.Done(); p.keepRegistered(ctx) }()
	}
	wg.Wait()
	log.Printf("stopped")
}
