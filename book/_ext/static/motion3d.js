// rbtutor: the 3D viewer of the motion-3d directive (book/_ext/motion3d.py).
//
// Each <figure class="rbtutor-motion3d"> carries its frames as JSON, computed by
// rbtutor when the book was built: time, GCS position of O, z-y-x Euler angles and
// Euler parameters (scalar first) per frame. This script only draws them: it
// places the body between two frames (position interpolated linearly, attitude by
// slerp of the two Euler-parameter sets) and shows the numbers of the nearest frame.
// The GCS is drawn as it is defined: x0 north, y0 west, z0 up, so the camera's up
// is z0. esbuild bundles this file with three.js into _static/motion3d.bundle.js.

import * as THREE from 'three';
import { OrbitControls } from 'three/addons/controls/OrbitControls.js';

const BODY_AXES = [0xd62728, 0x2ca02c, 0x1f77b4];     // x red, y green, z blue
const GCS_AXES = [0x7f1010, 0x145214, 0x0d3a66];
const HULL_COLOUR = 0x8fa8cc;

function label(text, colour, size) {
  // A text sprite (x0, y0, z0) drawn on a small canvas.
  const canvas = document.createElement('canvas');
  canvas.width = 128;
  canvas.height = 64;
  const ctx = canvas.getContext('2d');
  ctx.font = 'bold 44px sans-serif';
  ctx.fillStyle = '#' + colour.toString(16).padStart(6, '0');
  ctx.textAlign = 'center';
  ctx.textBaseline = 'middle';
  ctx.fillText(text, 64, 32);
  const sprite = new THREE.Sprite(new THREE.SpriteMaterial({ map: new THREE.CanvasTexture(canvas), depthTest: false }));
  sprite.scale.set(size * 2, size, 1);
  return sprite;
}

function axes(length, colours, names, labelSize) {
  const group = new THREE.Group();
  for (let k = 0; k < 3; k++) {
    const direction = new THREE.Vector3(k === 0 ? 1 : 0, k === 1 ? 1 : 0, k === 2 ? 1 : 0);
    group.add(new THREE.ArrowHelper(direction, new THREE.Vector3(), length, colours[k], 0.12 * length, 0.06 * length));
    if (names) {
      const sprite = label(names[k], colours[k], labelSize);
      sprite.position.copy(direction.clone().multiplyScalar(length * 1.12));
      group.add(sprite);
    }
  }
  return group;
}

function bodyMesh(data) {
  const geometry = new THREE.BufferGeometry();
  geometry.setAttribute('position', new THREE.Float32BufferAttribute(data.vertices.flat(), 3));
  geometry.setIndex(data.faces.flat());
  geometry.computeVertexNormals();
  const group = new THREE.Group();
  // Flat shading: each face of the hull reads as one plane.
  const flat = geometry.toNonIndexed();
  flat.computeVertexNormals();
  group.add(new THREE.Mesh(flat, new THREE.MeshLambertMaterial({
    color: HULL_COLOUR, transparent: true, opacity: 0.8, side: THREE.DoubleSide })));
  group.add(new THREE.LineSegments(new THREE.EdgesGeometry(geometry), new THREE.LineBasicMaterial({ color: 0x1a1a33 })));
  return group;
}

function format(value, digits) {
  const text = value.toFixed(digits);
  return /^-0\.?0*$/.test(text) ? text.slice(1) : text;   // no "-0.0"
}

function setUp(figure) {
  const data = JSON.parse(figure.querySelector('script.rbtutor-motion3d-data').textContent);
  const view = figure.querySelector('.rbtutor-motion3d-view');
  const play = figure.querySelector('.rbtutor-motion3d-play');
  const slider = figure.querySelector('.rbtutor-motion3d-time');
  const speed = figure.querySelector('.rbtutor-motion3d-speed');
  const readout = figure.querySelector('.rbtutor-motion3d-readout');
  const cellT = readout.querySelector('[data-t]');
  const cellAngle = [...readout.querySelectorAll('[data-angle]')];
  const cellQ = [...readout.querySelectorAll('[data-q]')];
  const t = data.t;
  const n = t.length;
  const step = t[1] - t[0];
  const timeDigits = step < 0.1 ? 2 : 1;

  const state = { time: 0, playing: false, last: null };
  let render = () => {};
  let body = null;

  // --- the three.js scene (skipped without WebGL: the still image is shown instead)
  let renderer = null;
  try {
    renderer = new THREE.WebGLRenderer({ antialias: true, preserveDrawingBuffer: true });
  } catch (error) {
    renderer = null;
  }
  if (renderer) {
    renderer.setPixelRatio(Math.min(window.devicePixelRatio || 1, 2));
    renderer.domElement.setAttribute('aria-hidden', 'true');
    view.appendChild(renderer.domElement);
    const scene = new THREE.Scene();
    scene.background = new THREE.Color(0xf7f9fc);
    scene.add(new THREE.AmbientLight(0xffffff, 1.2));
    const sun = new THREE.DirectionalLight(0xffffff, 1.8);
    sun.position.set(-0.4, -0.6, 1.0);
    scene.add(sun);

    const size = data.axisLength;
    // The extent of the run: the track of O plus the reach of the body.
    const reach = Math.max(...data.vertices.map(v => Math.hypot(v[0], v[1], v[2])), size);
    const box = new THREE.Box3();
    data.position.forEach(p => box.expandByPoint(new THREE.Vector3(p[0], p[1], p[2])));
    box.expandByScalar(reach);
    box.expandByPoint(new THREE.Vector3(0, 0, 0));
    const centre = box.getCenter(new THREE.Vector3());
    const radius = box.getSize(new THREE.Vector3()).length() / 2;

    // The waterline plane z0 = 0 as a grid (GridHelper lies in x-z; turn it into x0-y0).
    const gridSize = Math.ceil(2 * radius / size) * size;
    const grid = new THREE.GridHelper(gridSize, Math.round(gridSize / size) * 2, 0xb0b8c8, 0xdde2ea);
    grid.rotation.x = Math.PI / 2;
    grid.position.set(centre.x, centre.y, 0);
    scene.add(grid);
    scene.add(axes(1.2 * size, GCS_AXES, ['x0', 'y0', 'z0'], 0.18 * size));
    if (data.position.some(p => Math.hypot(p[0], p[1], p[2]) > 0.01)) {
      const track = new THREE.BufferGeometry().setFromPoints(data.position.map(p => new THREE.Vector3(p[0], p[1], p[2])));
      scene.add(new THREE.Line(track, new THREE.LineBasicMaterial({ color: 0x777777 })));
    }
    body = new THREE.Group();
    body.add(bodyMesh(data));
    body.add(axes(size, BODY_AXES, ['x', 'y', 'z'], 0.15 * size));
    scene.add(body);

    const camera = new THREE.PerspectiveCamera(40, 16 / 10, radius / 100, radius * 20);
    camera.up.set(0, 0, 1);
    // Seen from abaft the starboard side (x0 forward, y0 to port), a little from above.
    camera.position.copy(centre).add(new THREE.Vector3(-1.1, -1.9, 1.0).normalize().multiplyScalar(radius * 2.4));
    const controls = new OrbitControls(camera, renderer.domElement);
    controls.target.copy(centre);
    controls.update();

    render = () => renderer.render(scene, camera);
    controls.addEventListener('change', () => { if (!state.playing) render(); });
    const resize = () => {
      const width = view.clientWidth || 640;
      const height = Math.round(width * 10 / 16);
      renderer.setSize(width, height);
      camera.aspect = width / height;
      camera.updateProjectionMatrix();
      render();
    };
    new ResizeObserver(resize).observe(view);
    resize();
    figure.dataset.webgl = 'yes';
  } else {
    figure.classList.add('rbtutor-motion3d-nowebgl');
    figure.dataset.webgl = 'no';
  }

  const qa = new THREE.Quaternion();
  const qb = new THREE.Quaternion();
  const quaternion = (k, out) => {
    const q = data.parameters[k];                   // [theta0, theta1, theta2, theta3], scalar first
    return out.set(q[1], q[2], q[3], q[0]);         // three.js: (x, y, z, w)
  };

  const show = (time) => {
    state.time = Math.min(Math.max(time, 0), t[n - 1]);
    const i = Math.min(Math.floor(state.time / step), n - 2);
    const f = Math.min(Math.max((state.time - t[i]) / (t[i + 1] - t[i]), 0), 1);
    if (body) {
      const a = data.position[i];
      const b = data.position[i + 1];
      body.position.set(a[0] + f * (b[0] - a[0]), a[1] + f * (b[1] - a[1]), a[2] + f * (b[2] - a[2]));
      body.quaternion.slerpQuaternions(quaternion(i, qa), quaternion(i + 1, qb), f);
      // The pose as drawn, for the tests: O and the body x and z axes in GCS components.
      body.updateMatrixWorld();
      const m = body.matrixWorld.elements;       // column-major
      figure.dataset.pose = JSON.stringify({ origin: [m[12], m[13], m[14]], x: [m[0], m[1], m[2]], z: [m[8], m[9], m[10]] });
    }
    // The numbers are those of the nearest frame, as rbtutor computed them.
    const k = f < 0.5 ? i : i + 1;
    cellT.textContent = format(t[k], timeDigits);
    data.angles[k].forEach((angle, j) => { cellAngle[j].textContent = format(angle * 180 / Math.PI, 1); });
    data.parameters[k].forEach((value, j) => { cellQ[j].textContent = format(value, 3); });
    slider.value = String(k);
    slider.setAttribute('aria-valuetext', `t = ${format(t[k], timeDigits)} s`);
    figure.dataset.frame = String(k);
    render();
  };

  const setPlaying = (playing) => {
    state.playing = playing;
    state.last = null;
    play.textContent = playing ? 'Pause' : 'Play';
    // While playing, the readout changes many times a second: not announced then.
    readout.setAttribute('aria-live', playing ? 'off' : 'polite');
    if (playing) requestAnimationFrame(tick);
  };

  const tick = (now) => {
    if (!state.playing) return;
    if (state.last !== null) {
      const time = state.time + (now - state.last) / 1000 * parseFloat(speed.value);
      show(time);
      if (time >= t[n - 1]) { setPlaying(false); return; }
    }
    state.last = now;
    requestAnimationFrame(tick);
  };

  play.addEventListener('click', () => {
    if (!state.playing && state.time >= t[n - 1]) show(0);   // play again from the start
    setPlaying(!state.playing);
  });
  slider.addEventListener('input', () => {
    setPlaying(false);
    show(t[parseInt(slider.value, 10)]);
  });
  show(0);
  figure.dataset.state = 'ready';
}

function start() {
  document.querySelectorAll('figure.rbtutor-motion3d').forEach(figure => {
    try {
      setUp(figure);
    } catch (error) {
      figure.dataset.state = 'failed';
      figure.classList.add('rbtutor-motion3d-nowebgl');
      console.error('motion-3d:', error);
    }
  });
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
else start();
